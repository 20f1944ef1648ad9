import { z } from 'zod';

export const SCOPES = ['events:read', 'events:write', 'users:read', 'users:write', 'admin'] as const;
export const scopeSchema = z.enum(SCOPES);
export type Scope = z.infer<typeof scopeSchema>;

/** Parses `a,b,c` from the CLI; throws naming the unknown scope. */
export function parseScopeList(list: string | undefined): Scope[] {
  if (list === undefined || list.trim() === '') return [...SCOPES];
  const names = [
    ...new Set(
      list
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ];
  for (const n of names) {
    if (!(SCOPES as readonly string[]).includes(n)) throw new Error(`unknown scope "${n}"; expected some of ${SCOPES.join(', ')}`);
  }
  return names as Scope[];
}

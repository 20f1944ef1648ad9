import { z } from 'zod';
import { fail, ok, type Result } from '../errors.js';

export const SCOPES = ['events:read', 'events:write', 'users:read', 'users:write', 'admin'] as const;
export const scopeSchema = z.enum(SCOPES);
export type Scope = z.infer<typeof scopeSchema>;

/** Whoever makes a credential: a principal (an API key or a portal session) or the operator. */
export interface Maker {
  scopes: readonly Scope[];
}

/** The operator at the CLI (or a first key with its application): they hold the database, so every scope. */
export const OPERATOR: Maker = { scopes: SCOPES };

/**
 * The one rule for making a credential, an API key or a portal session, on every face: it
 * carries only scopes its maker holds. Anything more is refused whole (403), never trimmed,
 * so the caller learns what it asked beyond its own rank and nothing is made.
 */
export function grantScopes(maker: Maker, requested: readonly Scope[]): Result<Scope[]> {
  const scopes = SCOPES.filter((s) => requested.includes(s));
  const beyond = scopes.filter((s) => !maker.scopes.includes(s));
  if (beyond.length) return fail('FORBIDDEN', `The caller lacks the scopes it tries to grant: ${beyond.join(', ')}`);
  return ok(scopes);
}

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

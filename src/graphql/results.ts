import type { ZodError } from 'zod';
import { AppError } from '../errors.js';
import { zodDetails } from '../http/zod-details.js';
import { unwrapIdentity } from '../identity/users.js';

/** Unwraps a domain result into the GraphQL error of the one error table (keeping USER_MERGED's pointer). */
export const must = unwrapIdentity;

/** Parses resolver arguments with the same zod schema the REST face uses. */
export function parseInput<T>(
  schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: ZodError } },
  value: unknown,
): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new AppError('VALIDATION_ERROR', r.error.issues[0]?.message ?? 'Invalid input', zodDetails(r.error));
  return r.data;
}

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

/**
 * The rule of a paged field's `first` argument in the SDL's words, and `pageSize` enforcing it:
 * both from one bound, so the description cannot drift from what the resolver refuses.
 */
export const firstRange = (max: number, what: 'query' | 'field' = 'query') =>
  `\`first\` is 1 to ${max}; outside that the ${what} is refused (VALIDATION_ERROR).`;

/** `first` checked against `max` (see `firstRange`): VALIDATION_ERROR at `first` outside 1…max. */
export function pageSize(first: number | null | undefined, max: number): number {
  const n = first ?? 50;
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw new AppError('VALIDATION_ERROR', `first must be between 1 and ${max}`, [{ path: ['first'], message: 'out of range' }]);
  return n;
}

import type { z } from 'zod';
import type { ErrorDetail } from '../errors.js';

/** One detail per zod issue, with the path from the top of the request part. */
export function zodDetails(error: z.ZodError, prefix: (string | number)[] = []): ErrorDetail[] {
  return error.issues.flatMap((issue): ErrorDetail[] => {
    const path = [...prefix, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))];
    // One detail per unknown key, its path naming it, as every other detail names its field.
    if (issue.code === 'unrecognized_keys')
      return issue.keys.map((key) => ({ path: [...path, key], message: 'unknown field', code: issue.code }));
    return [{ path, message: issue.message, code: issue.code }];
  });
}

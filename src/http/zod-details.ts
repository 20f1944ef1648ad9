import type { z } from 'zod';
import type { ErrorDetail } from '../errors.js';

/** One detail per zod issue, with the path from the top of the request part. */
export function zodDetails(error: z.ZodError, prefix: (string | number)[] = []): ErrorDetail[] {
  return error.issues.map((issue) => ({
    path: [...prefix, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))],
    message: issue.message,
    code: issue.code,
  }));
}

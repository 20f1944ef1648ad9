/**
 * A failed attempt that should be retried; carries the receiver's Retry-After, if any, and the
 * delay already decided (and shown in the attempt log as its next retry time).
 */
export class DeliveryAttemptError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs?: number,
    readonly delayMs?: number,
  ) {
    super(message);
    this.name = 'DeliveryAttemptError';
  }
}

/** `Retry-After` as seconds or an HTTP date, in ms from now; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * The delay before attempt `attemptsMade + 1` (attempts numbered from 1): the schedule's
 * entry, lengthened to a receiver's Retry-After when it asks for more (at most twice the
 * scheduled delay), then ±10% jitter so a recovering receiver is not hit by every retry at once.
 */
export function retryDelay(schedule: readonly number[], attemptsMade: number, retryAfterMs?: number, random = Math.random): number {
  const scheduled = schedule[Math.min(attemptsMade, schedule.length - 1)] ?? 0;
  const wanted = retryAfterMs !== undefined && retryAfterMs > scheduled ? Math.min(retryAfterMs, 2 * scheduled) : scheduled;
  return Math.max(0, Math.round(wanted * (0.9 + 0.2 * random())));
}

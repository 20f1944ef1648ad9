import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Redis } from './redis.js';
import { tickBatch } from './tick-batch.js';

export interface LimitVerdict {
  allowed: boolean;
  /** What is left of the window's budget after this call. */
  remaining: number;
  /** Until the window ends (and, when refused, until a retry can succeed). */
  resetMs: number;
}

export interface WindowLimiter {
  /**
   * Spends `points` (default 1) of `key`'s budget, all or nothing: refused when they do not all
   * fit. Rejects when Redis cannot answer.
   */
  consume(key: string, points?: number): Promise<LimitVerdict>;
}

/**
 * `points` per `durationS`-second window per key, counted in Redis (rate-limiter-flexible) so
 * every process draws on the same budget. The calls of one event-loop turn for the same key
 * spend their points in one command: a burst costs a round trip per key, not one per call, and
 * a call spending several points (a GraphQL document of many mutations) is still one command.
 * The batch took the numbers `consumed − n + 1 … consumed` of its window, each call its own run
 * of them in arrival order, so exactly the calls past the budget are refused, as if each had
 * gone alone.
 *
 * With `lease`, each trip to Redis also draws up to `lease` spare points for this process,
 * spent locally by later calls of the same window without a round trip. Points are only ever
 * drawn from the shared count, so the budget still holds across processes; the price is that
 * points leased but unspent when the window ends were taken from the others (at most `lease`
 * per process and key), and `remaining` is this process's view. Fit for a flood guard, not
 * for a budget clients read (the API rate limit does not lease).
 */
export function createWindowLimiter(
  redis: Redis,
  keyPrefix: string,
  points: number,
  durationS: number,
  options: { lease?: number } = {},
): WindowLimiter {
  const limiter = new RateLimiterRedis({ storeClient: redis, keyPrefix, points, duration: durationS });
  const lease = Math.max(0, Math.min(options.lease ?? 0, points));
  const leases = new Map<string, { tokens: number; until: number }>();
  const spend = async (key: string, n: number): Promise<RateLimiterRes> => {
    try {
      return await limiter.consume(key, n);
    } catch (err) {
      // Past the budget the library rejects with the window's state; anything else is Redis failing.
      if (err instanceof RateLimiterRes) return err;
      throw err;
    }
  };
  const batched = tickBatch<{ key: string; n: number }, LimitVerdict>(
    async (calls) => {
      const byKey = new Map<string, number[]>();
      calls.forEach((c, i) => {
        const at = byKey.get(c.key);
        if (at) at.push(i);
        else byKey.set(c.key, [i]);
      });
      const verdicts: LimitVerdict[] = new Array(calls.length);
      await Promise.all(
        [...byKey].map(async ([key, at]) => {
          const wanted = at.reduce((sum, i) => sum + calls[i].n, 0);
          const res = await spend(key, wanted + lease);
          let taken = res.consumedPoints - (wanted + lease);
          for (const i of at) {
            taken += calls[i].n;
            verdicts[i] = { allowed: taken <= points, remaining: Math.max(0, points - taken), resetMs: res.msBeforeNext };
          }
          const spare = Math.min(lease, points - taken);
          if (spare > 0) {
            const until = performance.now() + res.msBeforeNext;
            const held = leases.get(key);
            // Batches of the same window (overlapping trips) add up their spare points.
            if (held && held.until > performance.now()) held.tokens += spare;
            else leases.set(key, { tokens: spare, until });
          }
        }),
      );
      return verdicts;
    },
    { maxBatch: 10_000 },
  );
  const consume = (key: string, n = 1): Promise<LimitVerdict> => {
    const held = lease ? leases.get(key) : undefined;
    if (held) {
      const left = held.until - performance.now();
      if (held.tokens >= n && left > 0) {
        held.tokens -= n;
        return Promise.resolve({ allowed: true, remaining: held.tokens, resetMs: left });
      }
      if (left <= 0) leases.delete(key);
    }
    return batched({ key, n });
  };
  return { consume };
}

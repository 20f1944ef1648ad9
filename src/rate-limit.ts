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
  readonly points: number;
  /** Spends one point of `key`'s budget. Rejects when Redis cannot answer. */
  consume(key: string): Promise<LimitVerdict>;
}

/**
 * `points` per `durationS`-second window per key, counted in Redis (rate-limiter-flexible) so
 * every process draws on the same budget. The calls of one event-loop turn for the same key
 * spend their points in one command: a burst costs a round trip per key, not one per call.
 * The batch took the numbers `consumed − n + 1 … consumed` of its window, in arrival order, so
 * exactly the calls past the budget are refused, as if each had gone alone.
 */
export function createWindowLimiter(redis: Redis, keyPrefix: string, points: number, durationS: number): WindowLimiter {
  const limiter = new RateLimiterRedis({ storeClient: redis, keyPrefix, points, duration: durationS });
  const spend = async (key: string, n: number): Promise<RateLimiterRes> => {
    try {
      return await limiter.consume(key, n);
    } catch (err) {
      // Past the budget the library rejects with the window's state; anything else is Redis failing.
      if (err instanceof RateLimiterRes) return err;
      throw err;
    }
  };
  const consume = tickBatch<string, LimitVerdict>(
    async (keys) => {
      const byKey = new Map<string, number[]>();
      keys.forEach((k, i) => {
        const at = byKey.get(k);
        if (at) at.push(i);
        else byKey.set(k, [i]);
      });
      const verdicts: LimitVerdict[] = new Array(keys.length);
      await Promise.all(
        [...byKey].map(async ([key, at]) => {
          const res = await spend(key, at.length);
          const first = res.consumedPoints - at.length + 1;
          at.forEach((i, j) => {
            const taken = first + j;
            verdicts[i] = { allowed: taken <= points, remaining: Math.max(0, points - taken), resetMs: res.msBeforeNext };
          });
        }),
      );
      return verdicts;
    },
    { maxBatch: 10_000 },
  );
  return { points, consume };
}

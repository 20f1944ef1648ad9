import type { Redis } from '../redis.js';
import { createWindowLimiter } from '../rate-limit.js';

type Verdict = { ok: true } | { ok: false; retryAfterMs: number };

export interface FloodGuard {
  /** Counts one accepted delivery for `key`; refused past the limit of the current window. */
  consume(key: string): Promise<Verdict>;
}

/**
 * The per-connection flood guard: at most `perSecond` accepted deliveries per connection per
 * second, shared by every web process (src/rate-limit.ts). Each trip to Redis leases a tenth
 * of the budget to this process, so most deliveries are admitted without one: the
 * acknowledgement waits for a single Redis round trip (the enqueue), not two.
 */
export function createFloodGuard(redis: Redis, keyPrefix: string, perSecond: number): FloodGuard {
  const limiter = createWindowLimiter(redis, keyPrefix, perSecond, 1, { lease: Math.max(1, Math.floor(perSecond / 10)) });
  return {
    async consume(key) {
      const v = await limiter.consume(key);
      return v.allowed ? { ok: true } : { ok: false, retryAfterMs: v.resetMs };
    },
  };
}

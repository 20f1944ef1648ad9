import type { Redis } from '../redis.js';
import { createWindowLimiter, type WindowLimiter } from '../rate-limit.js';

/**
 * The per-connection flood guard: at most `perSecond` accepted deliveries per connection per
 * second, shared by every web process (src/rate-limit.ts). Each trip to Redis leases a tenth
 * of the budget to this process, so most deliveries are admitted without one: the
 * acknowledgement waits for a single Redis round trip (the enqueue), not two.
 */
export function createFloodGuard(redis: Redis, keyPrefix: string, perSecond: number): WindowLimiter {
  return createWindowLimiter(redis, keyPrefix, perSecond, 1, { lease: Math.max(1, Math.floor(perSecond / 10)) });
}

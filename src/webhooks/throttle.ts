import type { Redis } from '../redis.js';

/**
 * A subscription's `max_per_second`, shared by every worker process: a counter per
 * subscription per wall-clock second in Redis. Returns 0 when the delivery may go now,
 * otherwise how long to wait (into the next second, spread a little so waiters do not all
 * wake at once).
 */
export async function takeDeliverySlot(redis: Redis, redisPrefix: string, subscriptionId: string, maxPerSecond: number): Promise<number> {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  const key = `${redisPrefix}:wh-rate:${subscriptionId}:${second}`;
  const [[, count]] = (await redis.multi().incr(key).pexpire(key, 2000).exec()) as [[Error | null, number], unknown];
  if (count <= maxPerSecond) return 0;
  const overflowSeconds = Math.floor((count - 1) / maxPerSecond);
  return (second + overflowSeconds) * 1000 - now + Math.floor(Math.random() * 50);
}

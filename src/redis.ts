import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from './logger.js';

export { Redis };

/**
 * ioredis factory. `blocking` connections (BullMQ workers, pub/sub subscribers) must retry
 * forever; request-path connections fail fast so a Redis outage answers 503 instead of
 * hanging the request. With a logger, an outage is logged once when the connection is lost
 * and once when it is back (ioredis would otherwise print every reconnect attempt).
 */
export function createRedis(url: string, kind: 'blocking' | 'request' = 'request', extra: RedisOptions = {}, logger?: Logger): Redis {
  const redis = new Redis(url, {
    lazyConnect: false,
    maxRetriesPerRequest: kind === 'blocking' ? null : 1,
    enableOfflineQueue: true,
    retryStrategy: (times) => Math.min(50 * times, 1000),
    ...extra,
  });
  if (logger) {
    let down = false;
    redis.on('error', (err: Error) => {
      if (!down) logger.warn({ err: err.message, kind }, 'Redis connection lost; reconnecting');
      down = true;
    });
    redis.on('ready', () => {
      if (down) logger.info({ kind }, 'Redis connection restored');
      down = false;
    });
  }
  return redis;
}

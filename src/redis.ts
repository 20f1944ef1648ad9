import { Redis, type RedisOptions } from 'ioredis';

export { Redis };

/**
 * ioredis factory. `blocking` connections (BullMQ workers, pub/sub subscribers) must retry
 * forever; request-path connections fail fast so a Redis outage answers 503 instead of
 * hanging the request.
 */
export function createRedis(url: string, kind: 'blocking' | 'request' = 'request', extra: RedisOptions = {}): Redis {
  return new Redis(url, {
    lazyConnect: false,
    maxRetriesPerRequest: kind === 'blocking' ? null : 1,
    enableOfflineQueue: true,
    retryStrategy: (times) => Math.min(50 * times, 1000),
    ...extra,
  });
}

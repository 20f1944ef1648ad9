import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from './logger.js';

export { Redis };

/**
 * A command on a request-path connection that has not been answered in this time means Redis
 * is not answering (paused, partitioned): the request fails instead of hanging. Our commands
 * (a rate-limit increment, a BullMQ add script) take well under a millisecond when it is up.
 */
const REQUEST_COMMAND_TIMEOUT_MS = 5_000;

/**
 * ioredis factory. `blocking` connections (BullMQ workers, pub/sub subscribers) must retry
 * forever and queue commands while reconnecting. `request` connections (rate limits, BullMQ
 * producers) fail fast instead: no offline queue, so a command issued while Redis is down is
 * refused at once and the request answers 503; no resending of commands that were in flight
 * when the connection dropped, so a request already answered 503 is never applied later
 * behind the client's back; and a bound on every command.
 */
export function createRedis(url: string, kind: 'blocking' | 'request' = 'request', extra: RedisOptions = {}): Redis {
  const failFast: RedisOptions =
    kind === 'request'
      ? {
          maxRetriesPerRequest: 1,
          enableOfflineQueue: false,
          autoResendUnfulfilledCommands: false,
          commandTimeout: REQUEST_COMMAND_TIMEOUT_MS,
        }
      : { maxRetriesPerRequest: null, enableOfflineQueue: true };
  return new Redis(url, {
    lazyConnect: false,
    retryStrategy: (times) => Math.min(50 * times, 1000),
    ...failFast,
    ...extra,
  });
}

/**
 * Logs a connection's outage once when it starts and once when it ends, instead of one
 * stack trace per reconnect attempt (ioredis prints those when nobody listens for `error`).
 */
export function watchConnection(redis: Redis, name: string, logger: Logger): Redis {
  let down = false;
  redis.on('error', (err: Error) => {
    if (down) return;
    down = true;
    logger.warn({ redis: name, err: err.message }, 'Redis connection lost; requests needing it answer 503 until it is back');
  });
  redis.on('ready', () => {
    if (!down) return;
    down = false;
    logger.info({ redis: name }, 'Redis connection restored');
  });
  return redis;
}

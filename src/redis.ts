import { Redis, type RedisOptions } from 'ioredis';
import { watchOutage, type ConnectionObserver } from './connection-watch.js';

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

/** Errors a watch has taken from its connection: BullMQ forwards the same objects to its Queue and Worker `error` events. */
const reported = new WeakSet<object>();
/** Whether `err` is a connection's own error, already told by its watch (so not worth a line of its own). */
export const reportedByWatch = (err: unknown): boolean => typeof err === 'object' && err !== null && reported.has(err);

/**
 * Tells a connection's outage once when it starts and once when it ends (src/connection-watch.ts)
 * instead of one stack trace per reconnect attempt: ioredis prints each failed attempt of a
 * connection nobody listens to, and BullMQ forwards each to its Queue and Worker `error` events.
 * Connections duplicated from this one (a BullMQ worker's blocking connection, QueueEvents) are
 * watched too, named after it and the last part of the name the duplicator gave them
 * (`workers/ledger`), else their number.
 */
export function watchConnection(redis: Redis, name: string, observer: ConnectionObserver): Redis {
  const outage = watchOutage('redis', name, observer);
  let lastError: string | undefined;
  redis.on('error', (err: Error) => {
    reported.add(err);
    lastError = err.message;
  });
  // Emitted when a connection closed other than by quit() and will be retried.
  redis.on('reconnecting', () => outage.lost(lastError ?? 'connection closed'));
  redis.on('ready', () => {
    lastError = undefined;
    outage.restored();
  });
  const duplicate = redis.duplicate.bind(redis);
  let duplicates = 0;
  redis.duplicate = (...args: Parameters<Redis['duplicate']>) =>
    watchConnection(duplicate(...args), `${name}/${args[0]?.connectionName?.split(':').pop() || ++duplicates}`, observer);
  return redis;
}

import { Cluster, Redis as Single, type RedisOptions } from 'ioredis';
type ClusterNode = { host: string; port: number };
import type { RedisTarget } from './config.js';
import type { Logger } from './logger.js';

/** A connection to one Redis server or to a Redis Cluster (REDIS_CLUSTER_NODES). */
export type Redis = Single | Cluster;

/**
 * A command on a request-path connection that has not been answered in this time means Redis
 * is not answering (paused, partitioned): the request fails instead of hanging. Our commands
 * (a rate-limit increment, a BullMQ add script) take well under a millisecond when it is up.
 */
const REQUEST_COMMAND_TIMEOUT_MS = 5_000;

/** Reconnect delay after a lost connection (ms): 50 ms growing to 1 s, forever. */
const reconnectDelay = (times: number) => Math.min(50 * times, 1000);

/**
 * ioredis factory. `blocking` connections (BullMQ workers, pub/sub subscribers) must retry
 * forever and queue commands while reconnecting. `request` connections (rate limits, BullMQ
 * producers) fail fast instead: no offline queue, so a command issued while Redis is down is
 * refused at once and the request answers 503; no resending of commands that were in flight
 * when the connection dropped, so a request already answered 503 is never applied later
 * behind the client's back; and a bound on every command.
 *
 * A Redis Cluster target gives a cluster client with the same options on each node's
 * connection: it follows MOVED/ASK redirections and a failover's new masters itself.
 */
export function createRedis(url: string, kind?: 'blocking' | 'request', extra?: RedisOptions): Single;
export function createRedis(target: RedisTarget, kind?: 'blocking' | 'request', extra?: RedisOptions): Redis;
export function createRedis(target: RedisTarget | string, kind: 'blocking' | 'request' = 'request', extra: RedisOptions = {}): Redis {
  const failFast: RedisOptions =
    kind === 'request'
      ? {
          maxRetriesPerRequest: 1,
          enableOfflineQueue: false,
          autoResendUnfulfilledCommands: false,
          commandTimeout: REQUEST_COMMAND_TIMEOUT_MS,
        }
      : { maxRetriesPerRequest: null, enableOfflineQueue: true };
  const at = typeof target === 'string' ? { url: target } : target;
  if ('url' in at) return new Single(at.url, { lazyConnect: false, retryStrategy: reconnectDelay, ...failFast, ...extra });
  const cluster = new Cluster(at.clusterNodes, {
    lazyConnect: false,
    clusterRetryStrategy: reconnectDelay,
    enableOfflineQueue: failFast.enableOfflineQueue,
    // Replicas are for failover here: every read goes to the master, which has every write.
    scaleReads: 'master',
    redisOptions: { ...failFast, ...extra },
  });
  seeds.set(cluster, at.clusterNodes);
  return cluster;
}

const seeds = new WeakMap<Cluster, ClusterNode[]>();
/** The seed nodes a cluster client was created with (the start-up check asks them when it cannot connect). */
export const seedsOf = (cluster: Cluster): ClusterNode[] => seeds.get(cluster) ?? [];

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

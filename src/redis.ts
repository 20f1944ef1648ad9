import { type ChainableCommander, Cluster, type ClusterOptions, Redis as Single, type RedisOptions } from 'ioredis';
import type { RedisTarget } from './config.js';
import { watchOutage, type ConnectionObserver } from './connection-watch.js';

type ClusterNode = { host: string; port: number };
/**
 * Options only a cluster client has, for sharded subscribers (src/pubsub.ts). `shardedSubscribers`:
 * SSUBSCRIBE goes to a connection of its own to the node serving the channel's slot, not to the
 * one subscriber connection classic SUBSCRIBE shares. `slotsRefreshInterval`: how often the
 * client asks the cluster for its slot map; a single server needs neither.
 */
type ClusterExtra = Pick<ClusterOptions, 'shardedSubscribers' | 'slotsRefreshInterval'>;

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
export function createRedis(target: RedisTarget, kind?: 'blocking' | 'request', extra?: RedisOptions, cluster?: ClusterExtra): Redis;
export function createRedis(
  target: RedisTarget | string,
  kind: 'blocking' | 'request' = 'request',
  extra: RedisOptions = {},
  clusterExtra: ClusterExtra = {},
): Redis {
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
  const { db, tls, ...credentials } = at.auth ?? {};
  const secured: RedisOptions = { ...credentials, ...(tls ? { tls: {} } : {}) };
  if ('sentinels' in at) {
    const redis = new Single({
      lazyConnect: false,
      retryStrategy: reconnectDelay,
      sentinels: at.sentinels,
      name: at.sentinelName,
      sentinelPassword: at.sentinelPassword,
      sentinelRetryStrategy: reconnectDelay,
      // Told of a failover by the sentinels themselves (+switch-master), not only when the old master stops answering.
      failoverDetector: true,
      // The sentinels are reached over TLS too when the master is (a `rediss://` REDIS_URL).
      ...(tls ? { enableTLSForSentinelMode: true, sentinelTLS: {} } : {}),
      // A demoted master refuses writes: reconnecting asks the sentinels for the new one.
      reconnectOnError: (err) => err.message.startsWith('READONLY'),
      db,
      ...secured,
      ...failFast,
      ...extra,
    });
    targets.set(redis, at);
    return redis;
  }
  const cluster = new Cluster(at.clusterNodes, {
    lazyConnect: false,
    clusterRetryStrategy: reconnectDelay,
    enableOfflineQueue: failFast.enableOfflineQueue,
    // Replicas are for failover here: every read goes to the master, which has every write.
    scaleReads: 'master',
    // How long the slot map may take to arrive from one node. ioredis's 1 s is shorter than a
    // starved process takes to read the answer (a machine at load 20 in the chaos run): each
    // node then "failed", the client dropped every connection and reconnected, and while a
    // master failed over, workers went round that for a minute instead of finding the new
    // master. The same bound as any command on a request connection: past it Redis is not answering.
    slotsRefreshTimeout: REQUEST_COMMAND_TIMEOUT_MS,
    redisOptions: { ...secured, ...failFast, ...extra },
    ...clusterExtra,
  });
  targets.set(cluster, at);
  return cluster;
}

/** Errors a watch has taken from its connection: BullMQ forwards the same objects to its Queue and Worker `error` events. */
const reported = new WeakSet<object>();
/** Whether `err` is a connection's own error, already told by its watch (so not worth a line of its own). */
export const reportedByWatch = (err: unknown): boolean => typeof err === 'object' && err !== null && reported.has(err);

const targets = new WeakMap<Redis, Exclude<RedisTarget, { url: string }>>();
/**
 * The cluster seeds or the sentinels a client was created with, and their credentials: the
 * start-up check asks them itself when the client cannot connect. Undefined for one server by URL.
 */
export const targetOf = (redis: Redis) => targets.get(redis);

/**
 * A one-shot connection to one server (a cluster seed, a sentinel) with `auth`'s credentials
 * and TLS: no retries, a short connect timeout, errors left to the caller's command.
 */
export function probeRedis(node: ClusterNode, auth: { username?: string; password?: string; tls?: true } = {}): Single {
  const { tls, ...credentials } = auth;
  const probe = new Single({
    host: node.host,
    port: node.port,
    ...credentials,
    ...(tls ? { tls: {} } : {}),
    retryStrategy: () => null,
    connectTimeout: 2_000,
    maxRetriesPerRequest: 0,
  });
  probe.on('error', () => {});
  return probe;
}

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
  // One wrapper for both clients: Redis.duplicate(options?) and Cluster.duplicate(nodes?, { redisOptions }),
  // where BullMQ passes the connection's name.
  const duplicate = redis.duplicate.bind(redis) as (...args: unknown[]) => Redis;
  let duplicates = 0;
  const nameOf = (args: unknown[]): string | undefined => {
    const options = (redis instanceof Cluster ? (args[1] as { redisOptions?: RedisOptions } | undefined)?.redisOptions : args[0]) as
      | RedisOptions
      | undefined;
    return options?.connectionName?.split(':').pop();
  };
  (redis as { duplicate: (...args: unknown[]) => Redis }).duplicate = (...args: unknown[]) =>
    watchConnection(duplicate(...args), `${name}/${nameOf(args) || ++duplicates}`, observer);
  return redis;
}

/**
 * The replies of a pipeline or MULTI. `exec` resolves even when commands failed, each error
 * beside its reply: the first one rejects here, so no caller reads an error as a reply.
 */
export async function execReplies(commands: ChainableCommander): Promise<unknown[]> {
  const replies = (await commands.exec()) ?? [];
  const failed = replies.find(([err]) => err);
  if (failed) throw failed[0];
  return replies.map(([, reply]) => reply);
}

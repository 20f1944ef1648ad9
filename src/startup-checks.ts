import { Cluster } from 'ioredis';
import { redisReady } from './availability.js';
import type { Logger } from './logger.js';
import { createRedis, seedsOf, type Redis } from './redis.js';

/** What the durability promise needs to know about the Redis it runs on. */
export interface RedisDurability {
  maxmemoryPolicy: string;
  appendonly: boolean;
  /** RDB save points (`save` config); empty when snapshots are off. */
  savePoints: string;
  /** `noeviction`: BullMQ keys can never be evicted under memory pressure. */
  evictionSafe: boolean;
  /** Append-only file or RDB snapshots on: a restart keeps queued jobs (AOF: all of them). */
  persistent: boolean;
}

/** Reads the settings; undefined when Redis cannot be reached in `waitMs` or forbids CONFIG GET. */
export async function inspectRedis(redis: Redis, waitMs = 5_000): Promise<RedisDurability | undefined> {
  try {
    await redisReady(redis, waitMs);
    const get = async (name: string) => ((await redis.config('GET', name)) as string[])[1] ?? '';
    const [maxmemoryPolicy, appendonly, savePoints] = await Promise.all([get('maxmemory-policy'), get('appendonly'), get('save')]);
    return {
      maxmemoryPolicy,
      appendonly: appendonly === 'yes',
      savePoints: savePoints.trim(),
      evictionSafe: maxmemoryPolicy === 'noeviction',
      persistent: appendonly === 'yes' || savePoints.trim() !== '',
    };
  } catch {
    return undefined;
  }
}

export interface CheckRedisOptions {
  /**
   * Called when Redis at start-up may evict keys. Refusing to start is the safe answer: under
   * eviction BullMQ silently loses jobs that clients were told are accepted.
   * @default exits the process with status 1
   */
  onUnsafe?: (durability: RedisDurability) => void;
  /** How long start-up waits for Redis before giving up on verifying it (ms). @default 5000 */
  waitMs?: number;
  /**
   * Called with one line when a Redis Cluster cannot serve (seeds unreachable, slots not
   * covered): the process would only fail every request, so it stops at start instead.
   * @default logs the line and exits the process with status 1
   */
  onClusterFault?: (line: string) => void;
  /** REDIS_SHARDED_PUBSUB is on: the server must know SPUBLISH/SSUBSCRIBE (Redis 7 or later). */
  shardedPubsub?: boolean;
  /**
   * Called with one line when the server cannot do what the configuration asks (sharded pub/sub
   * on a Redis older than 7): every wake would fail, so the process stops at start instead.
   * @default logs the line and exits the process with status 1
   */
  onVersionFault?: (line: string) => void;
}

/** Why a server of INFO `server` section `info` cannot serve sharded pub/sub, or undefined when it can. */
export function shardedPubsubFault(info: string): string | undefined {
  const version = /^redis_version:([\d.]+)/m.exec(info)?.[1];
  if (version !== undefined && Number(version.split('.')[0]) >= 7) return undefined;
  return `REDIS_SHARDED_PUBSUB needs Redis 7 or later (SPUBLISH/SSUBSCRIBE); the server reports redis_version ${version ?? 'unknown'}: upgrade it or unset REDIS_SHARDED_PUBSUB`;
}

/** Slots a Redis Cluster must serve, all of them, for every key to have a home. */
const CLUSTER_SLOTS = 16_384;

/** CLUSTER INFO of the first seed node that answers it. */
async function seedInfo(nodes: { host: string; port: number }[]): Promise<unknown> {
  for (const { host, port } of nodes) {
    const probe = createRedis(`redis://${host.includes(':') ? `[${host}]` : host}:${port}`, 'blocking', {
      retryStrategy: () => null,
      connectTimeout: 2_000,
    });
    probe.on('error', () => {});
    try {
      return await probe.call('CLUSTER', 'INFO');
    } catch {
      // the next seed
    } finally {
      probe.disconnect();
    }
  }
  return undefined;
}

/** Why a cluster client cannot serve, or undefined when every slot is served. */
async function clusterFault(cluster: Cluster, waitMs: number): Promise<string | undefined> {
  const ready = await redisReady(cluster, waitMs).then(
    () => true,
    () => false,
  );
  // ioredis calls the cluster ready only once a node answers and reports cluster_state:ok;
  // when it does not, the seeds themselves say whether they answer and what they serve.
  const info = ready ? await cluster.call('CLUSTER', 'INFO').catch(() => undefined) : await seedInfo(seedsOf(cluster));
  if (info === undefined)
    return `Redis Cluster: no seed node of REDIS_CLUSTER_NODES answered within ${waitMs} ms; check the addresses and that the nodes run with cluster-enabled yes`;
  const field = (name: string) => new RegExp(`^${name}:([^\r\n]*)`, 'm').exec(String(info))?.[1];
  const served = Number(field('cluster_slots_ok') ?? 0);
  if (ready && field('cluster_state') === 'ok' && served === CLUSTER_SLOTS) return undefined;
  return `Redis Cluster: cluster_state:${field('cluster_state') ?? 'unknown'}, ${served} of ${CLUSTER_SLOTS} slots served; every slot needs a master (redis-cli --cluster check, then fix or add nodes)`;
}

/**
 * Start-up check of the web and worker processes: `maxmemory-policy` must be `noeviction`
 * (otherwise the process refuses to start, naming the fix), and Redis without persistence gets
 * a loud warning (a restart would drop every queued job). The check runs again after every
 * reconnect, since a restarted Redis may come back with another configuration; then it only logs.
 */
export async function checkRedis(redis: Redis, logger: Logger, options: CheckRedisOptions = {}): Promise<RedisDurability | undefined> {
  /** A configuration this Redis cannot serve: one line, and the process stops. */
  const stop = (line: string) => {
    logger.error(line);
    logger.flush?.();
    process.exit(1);
  };
  if (redis instanceof Cluster) {
    const fault = await clusterFault(redis, options.waitMs ?? 5_000);
    if (fault) {
      (options.onClusterFault ?? stop)(fault);
      return undefined;
    }
  }
  if (options.shardedPubsub) {
    // Asked of one node: a cluster's nodes run one version (a rolling upgrade to 7 ends before this is turned on).
    const info = await redisReady(redis, options.waitMs ?? 5_000)
      .then(() => redis.info('server'))
      .catch(() => undefined);
    const fault = info === undefined ? undefined : shardedPubsubFault(info);
    if (fault) {
      (options.onVersionFault ?? stop)(fault);
      return undefined;
    }
  }
  const report = (d: RedisDurability) => {
    if (!d.evictionSafe) {
      logger.error(
        { maxmemoryPolicy: d.maxmemoryPolicy },
        `Redis maxmemory-policy is "${d.maxmemoryPolicy}": queued jobs can be evicted and lost. Fix: CONFIG SET maxmemory-policy noeviction (and put it in redis.conf)`,
      );
    }
    if (!d.persistent) {
      logger.warn(
        'Redis has NO PERSISTENCE (appendonly no, no save points): a Redis restart loses every queued job, including accepted events not yet in the ledger. Production: appendonly yes, appendfsync everysec or always',
      );
    } else if (!d.appendonly) {
      logger.warn(
        { save: d.savePoints },
        'Redis persists by RDB snapshots only: a crash loses the jobs queued since the last snapshot. Production: appendonly yes',
      );
    }
  };

  let first = true;
  redis.on('ready', () => {
    if (first) return;
    void inspectRedis(redis, 0).then((d) => d && report(d));
  });
  const durability = await inspectRedis(redis, options.waitMs ?? 5_000);
  first = false;
  if (!durability) {
    logger.warn('could not read the Redis configuration to verify maxmemory-policy and persistence (unreachable, or CONFIG is disabled)');
    return undefined;
  }
  report(durability);
  if (!durability.evictionSafe) {
    (
      options.onUnsafe ??
      (() => {
        logger.flush?.();
        process.exit(1);
      })
    )(durability);
  }
  return durability;
}

import { Cluster } from 'ioredis';
import { redisReady } from './availability.js';
import type { Logger } from './logger.js';
import type { RedisAuth } from './config.js';
import { probeRedis, targetOf, type Redis } from './redis.js';

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
   * covered) or the sentinels name no reachable master (sentinels unreachable, an unknown
   * master name): the process would only fail every request, so it stops at start instead.
   * @default logs the line and exits the process with status 1
   */
  onTopologyFault?: (line: string) => void;
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

/** A refusal of the credentials (Redis's own words name neither the user's password nor ours). */
const AUTH_REFUSED = /^(WRONGPASS|NOAUTH|NOPERM)\b/;

/**
 * The first answer to `command` from any of `nodes`; undefined when none answers, or the
 * refusal when a node answered but refused the credentials.
 */
async function askAny(
  nodes: { host: string; port: number }[],
  auth: RedisAuth | undefined,
  command: string[],
): Promise<{ answer: unknown } | { refused: string } | undefined> {
  let refused: string | undefined;
  for (const node of nodes) {
    const probe = probeRedis(node, auth);
    try {
      return { answer: await probe.call(command[0], ...command.slice(1)) };
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (AUTH_REFUSED.test(message)) refused = message;
    } finally {
      probe.disconnect();
    }
  }
  return refused === undefined ? undefined : { refused };
}

/** Why a cluster client cannot serve, or undefined when every slot is served. */
async function clusterFault(cluster: Cluster, waitMs: number): Promise<string | undefined> {
  const ready = await redisReady(cluster, waitMs).then(
    () => true,
    () => false,
  );
  // ioredis calls the cluster ready only once a node answers and reports cluster_state:ok;
  // when it does not, the seeds themselves say whether they answer and what they serve.
  const target = targetOf(cluster);
  const seeds = target && 'clusterNodes' in target ? target.clusterNodes : [];
  const asked = ready
    ? { answer: await cluster.call('CLUSTER', 'INFO').catch(() => undefined) }
    : await askAny(seeds, target?.auth, ['CLUSTER', 'INFO']);
  if (asked && 'refused' in asked)
    return `Redis Cluster: the seed nodes refused REDIS_URL's credentials (${asked.refused.split('.')[0]}); set the cluster's user and password in REDIS_URL`;
  const info = asked?.answer;
  if (info === undefined)
    return `Redis Cluster: no seed node of REDIS_CLUSTER_NODES answered within ${waitMs} ms; check the addresses, that the nodes run with cluster-enabled yes, and REDIS_URL's credentials`;
  const field = (name: string) => new RegExp(`^${name}:([^\r\n]*)`, 'm').exec(String(info))?.[1];
  const served = Number(field('cluster_slots_ok') ?? 0);
  if (ready && field('cluster_state') === 'ok' && served === CLUSTER_SLOTS) return undefined;
  return `Redis Cluster: cluster_state:${field('cluster_state') ?? 'unknown'}, ${served} of ${CLUSTER_SLOTS} slots served; every slot needs a master (redis-cli --cluster check, then fix or add nodes)`;
}

/** Why a client that finds its master through sentinels cannot serve, or undefined when it is connected. */
async function sentinelFault(redis: Redis, waitMs: number): Promise<string | undefined> {
  const target = targetOf(redis);
  if (!target || !('sentinels' in target)) return undefined;
  const ready = await redisReady(redis, waitMs).then(
    () => true,
    () => false,
  );
  if (ready) return undefined;
  const name = target.sentinelName;
  const asked = await askAny(target.sentinels, { password: target.sentinelPassword, ...(target.auth?.tls ? { tls: true } : {}) }, [
    'SENTINEL',
    'get-master-addr-by-name',
    name,
  ]);
  if (asked && 'refused' in asked) return `Redis Sentinel: the sentinels refused REDIS_SENTINEL_PASSWORD (${asked.refused.split('.')[0]})`;
  if (!asked)
    return `Redis Sentinel: no sentinel of REDIS_SENTINELS answered within ${waitMs} ms; check the addresses (and REDIS_SENTINEL_PASSWORD when they require one)`;
  const at = asked.answer as [string, string] | null;
  if (!at)
    return `Redis Sentinel: no sentinel of REDIS_SENTINELS monitors a master named "${name}"; check REDIS_SENTINEL_NAME (SENTINEL MASTERS on a sentinel lists them)`;
  return `Redis Sentinel: the master "${name}" at ${at[0]}:${at[1]} did not answer within ${waitMs} ms; check that it runs and REDIS_URL's credentials`;
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
  const waitMs = options.waitMs ?? 5_000;
  const fault = redis instanceof Cluster ? await clusterFault(redis, waitMs) : await sentinelFault(redis, waitMs);
  if (fault) {
    (options.onTopologyFault ?? stop)(fault);
    return undefined;
  }
  if (options.shardedPubsub) {
    // Asked of one node: a cluster's nodes run one version (a rolling upgrade to 7 ends before this is turned on).
    const info = await redisReady(redis, waitMs)
      .then(() => redis.info('server'))
      .catch(() => undefined);
    const versionFault = info === undefined ? undefined : shardedPubsubFault(info);
    if (versionFault) {
      (options.onVersionFault ?? stop)(versionFault);
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
  const durability = await inspectRedis(redis, waitMs);
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

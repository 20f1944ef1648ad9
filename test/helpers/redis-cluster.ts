import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createRedis, type Redis } from '../../src/redis.js';
import { startRedisServer, type RedisServer } from './redis-server.js';

const run = promisify(execFile);

export interface RedisClusterOptions {
  /** Directory the nodes' data directories are created in. @default the system's temp directory */
  parent?: string;
  /**
   * How long a master may be unreachable before its replica takes over (ms, `cluster-node-timeout`).
   * Redis's default is 15 s; a short one keeps a failover test quick. @default 3000
   */
  nodeTimeoutMs?: number;
  /** Each node in a process group of its own (RedisServerOptions.detached). @default false */
  detached?: boolean;
  /** Every node requires this password (`requirepass`, and `masterauth` for its replica link). @default none */
  password?: string;
}

export interface RedisCluster {
  /** The six nodes, in the order `redis-cli --cluster create` got them (it made the first three masters). */
  nodes: RedisServer[];
  /** `host:port` of every node, comma-separated: a `REDIS_CLUSTER_NODES` value. */
  seeds: string;
  /** The nodes that are masters now (a failover changes them). */
  masters(): Promise<RedisServer[]>;
  /** The master serving `key`'s slot now and its replica, as the nodes' view (CLUSTER SLOTS) has them. */
  serving(key: string): Promise<{ slot: number; master: RedisServer; replica?: RedisServer }>;
  /** Sends a command to one node alone (its own connection, not the cluster's routing); rejects when it has not answered in 2 s. */
  ask(node: RedisServer, ...command: (string | number)[]): Promise<unknown>;
  /**
   * Resolves once `node` is a master, or a replica whose link to its master is up (one a WAIT
   * on that master counts), with the seconds it took; rejects after `timeoutMs`.
   */
  waitForRole(node: RedisServer, role: 'master' | 'replica', timeoutMs?: number): Promise<number>;
  /** Stops every node and removes their directories. */
  destroy(): Promise<void>;
}

/**
 * A Redis Cluster of 3 masters with one replica each, six private redis-server processes on
 * free ports (append-only, no RDB snapshots): what a cluster-mode deployment runs, for tests,
 * the chaos harness and `npm run dev:cluster`. Resolves once every node reports
 * `cluster_state:ok` and every master has its replica attached and in sync.
 */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const args = [
    ...['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'],
    ...['--cluster-node-timeout', String(options.nodeTimeoutMs ?? 3000)],
    ...['--appendonly', 'yes', '--maxmemory-policy', 'noeviction'],
    ...(options.password ? ['--requirepass', options.password, '--masterauth', options.password] : []),
  ];
  const started = await Promise.allSettled(
    Array.from({ length: 6 }, () => startRedisServer({ args, parent: options.parent, detached: options.detached, clusterBus: true })),
  );
  const nodes = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const destroy = async () => void (await Promise.all(nodes.map((n) => n.destroy())));
  const failed = started.find((s) => s.status === 'rejected');
  if (failed) {
    await destroy();
    throw failed.reason;
  }
  const auth = options.password ? `:${encodeURIComponent(options.password)}@` : '';
  const admins = nodes.map((n) => createRedis(`redis://${auth}127.0.0.1:${n.port}/0`, 'blocking'));
  // A node a test killed is retried forever: its refusals are expected, not worth a trace each.
  for (const a of admins) a.on('error', () => {});
  const closeAdmins = () => {
    for (const a of admins) a.disconnect();
  };
  try {
    await run(
      'redis-cli',
      [
        ...(options.password ? ['-a', options.password, '--no-auth-warning'] : []),
        ...['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '1', '--cluster-yes'],
      ],
      { timeout: 60_000 },
    );
    await waitForCluster(admins);
  } catch (err) {
    closeAdmins();
    await destroy();
    throw err;
  }
  return {
    nodes,
    seeds: nodes.map((n) => `127.0.0.1:${n.port}`).join(','),
    async masters() {
      const roles = await Promise.all(
        admins.map(async (a, i) => (nodes[i].running() && (await roleOf(a).catch(() => undefined)) === 'master' ? nodes[i] : undefined)),
      );
      return roles.filter((n): n is RedisServer => n !== undefined);
    },
    async serving(key) {
      const live = admins.find((_, i) => nodes[i].running())!;
      const slot = Number(await live.call('CLUSTER', 'KEYSLOT', key));
      const ranges = (await live.call('CLUSTER', 'SLOTS')) as [number, number, ...[string, number][]][];
      const range = ranges.find(([from, to]) => from <= slot && slot <= to);
      const byPort = (port?: number) => nodes.find((n) => n.port === port);
      const master = byPort(range?.[2]?.[1]);
      if (!master) throw new Error(`no master serves slot ${slot}: ${JSON.stringify(ranges)}`);
      return { slot, master, replica: byPort(range?.[3]?.[1]) };
    },
    ask,
    async waitForRole(node, role, timeoutMs = 30_000) {
      const started = Date.now();
      const pattern = role === 'master' ? /^role:master/m : /^master_link_status:up/m;
      for (;;) {
        const info = await ask(node, 'INFO', 'replication').catch(() => '');
        if (pattern.test(String(info))) return (Date.now() - started) / 1000;
        if (Date.now() - started > timeoutMs) throw new Error(`port ${node.port} is no ${role} after ${timeoutMs / 1000} s: ${info}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async destroy() {
      closeAdmins();
      await destroy();
    },
  };

  async function ask(node: RedisServer, ...command: (string | number)[]): Promise<unknown> {
    // The node's admin connection queues the command until it is connected (a node just started).
    const admin = admins[nodes.indexOf(node)];
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        admin.call(String(command[0]), ...command.slice(1)),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`port ${node.port} did not answer`)), 2_000))),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }
}

const roleOf = async (redis: Redis) => ((await redis.call('ROLE')) as [string])[0];

/**
 * Every node sees the cluster whole, each of the three masters has an in-sync replica, and
 * every node's own view (CLUSTER SLOTS) already names each slot range's replica: the gossip
 * that spreads it lags the replica's attachment, and a test asking any node which server holds
 * a slot's copy must get an answer.
 */
async function waitForCluster(admins: Redis[]): Promise<void> {
  const deadline = Date.now() + 60_000;
  let last = '';
  for (;;) {
    const states = await Promise.all(
      admins.map(async (a) => {
        const info = String(await a.call('CLUSTER', 'INFO'));
        const replication = await a.info('replication');
        const slots = (await a.call('CLUSTER', 'SLOTS')) as unknown[][];
        return {
          replicasKnown: slots.length >= 3 && slots.every((range) => range.length >= 4),
          ok: /cluster_state:ok/.test(info),
          master: /role:master/.test(replication),
          replicaOnline: /slave0:.*state=online/.test(replication),
          linkUp: /master_link_status:up/.test(replication),
        };
      }),
    );
    const masters = states.filter((s) => s.master);
    if (
      states.every((s) => s.ok && s.replicasKnown) &&
      masters.length === 3 &&
      masters.every((m) => m.replicaOnline) &&
      states.every((s) => s.master || s.linkUp)
    )
      return;
    last = JSON.stringify(states);
    if (Date.now() > deadline) throw new Error(`the Redis Cluster did not become ready: ${last}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

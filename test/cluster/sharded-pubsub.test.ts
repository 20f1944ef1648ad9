import { randomUUID } from 'node:crypto';
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { redisReady } from '../../src/availability.js';
import { parseConfig, type RedisTarget } from '../../src/config.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { addCommitReports, reportChannels, subscribeCommitReports } from '../../src/ledger/commit-reports.js';
import { publishWakes, wakeChannels } from '../../src/ledger/wake.js';
import { createWakeHub, type WakeHub } from '../../src/ledger/wake-hub.js';
import type { CommittedEvent } from '../../src/ledger/write.js';
import { createLogger } from '../../src/logger.js';
import { createMetrics } from '../../src/metrics.js';
import { type Outgoing, publishAll } from '../../src/pubsub.js';
import { createRedis, type Redis } from '../../src/redis.js';
import { shardedPubsubFault } from '../../src/startup-checks.js';
import { createTailRegistry, type TailEvent } from '../../src/stream/tail.js';
import { startReader } from '../../src/stream/reader.js';
import { busCounters, busPer } from '../helpers/cluster-bus.js';
import { startRedisCluster, type RedisCluster } from '../helpers/redis-cluster.js';
import type { RedisServer } from '../helpers/redis-server.js';
import { createTestEnv, type TestEnv } from '../helpers/stack.js';
import { commit, until } from '../stream/helpers.js';

/**
 * REDIS_SHARDED_PUBSUB on a real Redis Cluster of 3 masters + 3 replicas: wakes and commit
 * reports go by SPUBLISH to their channel's shard only, reach listeners whichever master serves
 * them, cost the cluster bus one copy per wake (to the shard's replica) instead of one per other
 * node, and a slot that moves (a failover) costs at most the wakes of the moment: the hub is
 * subscribed again on the new master, and a tail's periodic re-check has the events meanwhile.
 */
let cluster: RedisCluster;
let t: TestEnv;
let target: RedisTarget;
let pub: Redis;
const observer = { logger: createLogger('silent'), metrics: createMetrics() };
const prefix = '{sp}';
const sharded = wakeChannels({ REDIS_PREFIX: prefix, REDIS_SHARDED_PUBSUB: true });
const classic = wakeChannels({ REDIS_PREFIX: prefix, REDIS_SHARDED_PUBSUB: false });

beforeAll(async () => {
  [cluster, t] = await Promise.all([startRedisCluster(), createTestEnv()]);
  target = { clusterNodes: cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })) };
  pub = createRedis(target, 'request');
  await until(() => pub.status === 'ready', 10_000, 'cluster client ready');
});
afterAll(async () => {
  pub?.disconnect();
  await t?.dropDatabase();
  await cluster?.destroy();
});

const woken = (appId: string, seq: number) => [{ app_id: appId, seq } as CommittedEvent];

/** `host:port` of the master serving `channel`'s slot, as the cluster client knows it. */
async function ownerOf(channel: string): Promise<string> {
  const slot = Number(await pub.call('CLUSTER', 'KEYSLOT', channel));
  return (pub as Cluster).slots[slot][0];
}

/** One application id whose wake channel each master serves: the wakes of the test then touch every shard. */
async function appOnEachMaster(): Promise<string[]> {
  const masters = (await cluster.masters()).map((m) => `127.0.0.1:${m.port}`);
  const byMaster = new Map<string, string>();
  while (byMaster.size < masters.length) {
    const appId = randomUUID();
    const owner = await ownerOf(sharded.of(appId));
    if (!byMaster.has(owner)) byMaster.set(owner, appId);
  }
  return [...byMaster.values()];
}

async function roleOf(node: RedisServer): Promise<string[]> {
  const admin = createRedis(node.url, 'blocking');
  try {
    return ((await admin.call('ROLE')) as unknown[]).map(String);
  } finally {
    admin.disconnect();
  }
}

describe('REDIS_SHARDED_PUBSUB on a 3-master Redis Cluster', () => {
  it('names each channel after its application (or reply id) so channels spread over the slots whatever tag the prefix holds', async () => {
    const appId = randomUUID();
    expect(sharded.of(appId)).toBe(`{${appId}}:{sp}:wake`);
    expect(reportChannels({ REDIS_PREFIX: prefix, REDIS_SHARDED_PUBSUB: true }).of('r1')).toBe('{r1}:{sp}:committed');
    expect(await pub.call('CLUSTER', 'KEYSLOT', sharded.of(appId))).toBe(await pub.call('CLUSTER', 'KEYSLOT', appId));
    // Classic names keep today's form (the pattern subscription and older processes rely on it).
    expect(classic.of(appId)).toBe(`{sp}:wake:${appId}`);
  });

  it('a wake reaches its listener whichever master serves its channel, and the subscription lives on that shard', async () => {
    const hub = createWakeHub(target, sharded, observer);
    try {
      const apps = await appOnEachMaster();
      const got = new Map<string, number | undefined>();
      const offs = apps.map((a) => hub.on(a, (appId, seq) => got.set(appId, seq)));
      await Promise.all(apps.map((a) => hub.subscribed(a)));
      for (const [i, a] of apps.entries()) await publishWakes(pub, sharded, woken(a, i + 10));
      await until(() => got.size === apps.length, 5_000, 'a wake of every application');
      expect(apps.map((a) => got.get(a))).toEqual([10, 11, 12]);
      for (const a of apps) {
        const [host, port] = (await ownerOf(sharded.of(a))).split(':');
        const owner = createRedis(`redis://${host}:${port}`, 'blocking');
        expect(((await owner.call('PUBSUB', 'SHARDNUMSUB', sharded.of(a))) as unknown[])[1]).toBe(1);
        owner.disconnect();
      }
      // The last listener gone, the process leaves the channel.
      for (const off of offs) off();
      await until(
        async () => Number(((await pub.call('PUBSUB', 'SHARDNUMSUB', sharded.of(apps[0]))) as unknown[])[1]) === 0,
        5_000,
        'the channel left',
      );
    } finally {
      await hub.close();
    }
  });

  it("a commit report reaches its web process on the process's own sharded channel", async () => {
    const channels = reportChannels({ REDIS_PREFIX: prefix, REDIS_SHARDED_PUBSUB: true });
    const replyTo = randomUUID();
    const heard: [string, string, unknown][] = [];
    const sub = subscribeCommitReports(target, channels, replyTo, observer, {
      commit: (appId, id, outcome) => heard.push([appId, id, outcome]),
      send: () => undefined,
    });
    try {
      await sub.ready;
      const out: Outgoing[] = [];
      const event = { app_id: 'a1', id: 'e1', seq: 7, created_at: '2026-01-01T00:00:00Z' } as CommittedEvent;
      addCommitReports(out, channels, [event], new Map([['e1', replyTo]]));
      await publishAll(pub, channels, out);
      await until(() => heard.length === 1, 5_000, 'the report');
      expect(heard[0]).toEqual(['a1', 'e1', { seq: 7, created_at: '2026-01-01T00:00:00Z' }]);
    } finally {
      await sub.close();
    }
  });

  it('costs the cluster bus one message per wake (to the shard replica) instead of one per other node', async () => {
    const wakes = 300;
    const apps = await appOnEachMaster();
    const measure = async (channels: typeof sharded) => {
      const before = await busCounters(cluster.nodes);
      for (let i = 0; i < wakes; i++) await publishWakes(pub, channels, woken(apps[i % apps.length], i + 1));
      return busPer(before, await busCounters(cluster.nodes), wakes);
    };
    const classicCost = await measure(classic);
    const shardedCost = await measure(sharded);
    console.log(`cluster bus per wake: classic ${JSON.stringify(classicCost)}, sharded ${JSON.stringify(shardedCost)}`);
    // Classic: the receiving node copies each PUBLISH to the 5 other nodes.
    expect(classicCost.publishSent).toBe(5);
    expect(classicCost.publishshardSent).toBe(0);
    // Sharded: only to the one replica of the channel's master.
    expect(shardedCost.publishshardSent).toBe(1);
    expect(shardedCost.publishSent).toBe(0);
    expect(shardedCost.sent).toBeLessThan(classicCost.sent);
  });

  it('after a failover of the master serving a channel, wakes arrive again and a tail reading across it misses nothing', async () => {
    const config = parseConfig({
      ...t.env,
      REDIS_CLUSTER_NODES: cluster.seeds,
      REDIS_PREFIX: prefix,
      REDIS_SHARDED_PUBSUB: '1',
    });
    const deps: Deps = createDeps(config, { logger: observer.logger });
    const hub: WakeHub = createWakeHub(config.redis, wakeChannels(config), deps);
    const tails = createTailRegistry(deps, hub, deps.logger, { recheckMs: 500 });
    try {
      const app = await createApplication(deps.sql, 'failover', ['events:read']);
      const got: TailEvent[] = [];
      const sink = { closed: false, send: async (e: TailEvent) => void got.push(e), push: (e: TailEvent) => void got.push(e) };
      const reader = await startReader(deps.sql, tails, app.appId, {}, { live: true }, sink);
      const heard: number[] = [];
      const off = hub.on(app.appId, (_a, seq) => seq !== undefined && heard.push(seq));
      await hub.subscribed(app.appId);
      const ids = await commit(deps, app.appId, [{ payload: { n: 0 } }]);
      await until(() => heard.length === 1 && got.length === 1, 5_000, 'the first wake and event');

      // The replica of the channel's master takes over (CLUSTER FAILOVER, as an operator or a managed service would).
      const owner = await ownerOf(wakeChannels(config).of(app.appId));
      const replica = await findAsync(cluster.nodes, async (n) => {
        const role = await roleOf(n);
        return role[0] === 'slave' && `${role[1]}:${role[2]}` === owner;
      });
      const admin = createRedis(replica.url, 'blocking');
      await admin.call('CLUSTER', 'FAILOVER');
      await until(async () => (await roleOf(replica))[0] === 'master', 15_000, 'the replica promoted');
      admin.disconnect();
      // Commits right across the failover: their wakes may be lost, the tail's re-check is not.
      for (let n = 1; n <= 5; n++) ids.push(...(await commit(deps, app.appId, [{ payload: { n } }])));
      await until(() => got.length === ids.length, 15_000, 'every event at the tail');
      expect(got.map((e) => e.record.id)).toEqual(ids);
      // And the subscription itself comes back on the new master: a wake is heard again.
      let seq = 1_000;
      await until(
        async () => {
          await publishWakes(deps.redis, wakeChannels(config), woken(app.appId, ++seq));
          return heard.some((s) => s >= 1_000);
        },
        20_000,
        'a wake after the failover',
      );
      off();
      reader.close();
    } finally {
      tails.close();
      await hub.close();
      await closeDeps(deps);
    }
  });
});

describe('REDIS_SHARDED_PUBSUB on a single Redis server', () => {
  it('works on Redis 7 (SPUBLISH/SSUBSCRIBE need no cluster), and an older server is refused at start with one line', async () => {
    const single = wakeChannels({ REDIS_PREFIX: `sp${process.pid}`, REDIS_SHARDED_PUBSUB: true });
    const hub = createWakeHub(t.config.redis, single, observer);
    const redis = createRedis(t.config.redis, 'request');
    try {
      // A request connection queues nothing while it connects: a pipeline sent before it is
      // ready answers each command with an error, which publishing (fire and forget) drops.
      await redisReady(redis, 5_000);
      const appId = randomUUID();
      const got: number[] = [];
      hub.on(appId, (_a, seq) => seq !== undefined && got.push(seq));
      await hub.subscribed(appId);
      await publishWakes(redis, single, [...woken(appId, 3), ...woken(randomUUID(), 4)]);
      await until(() => got.length === 1, 15_000, 'the wake');
      expect(got).toEqual([3]);
      expect(shardedPubsubFault(await redis.info('server'))).toBeUndefined();
      expect(shardedPubsubFault('# Server\r\nredis_version:6.2.14\r\n')).toBe(
        'REDIS_SHARDED_PUBSUB needs Redis 7 or later (SPUBLISH/SSUBSCRIBE); the server reports redis_version 6.2.14: upgrade it or unset REDIS_SHARDED_PUBSUB',
      );
    } finally {
      redis.disconnect();
      await hub.close();
    }
  });
});

async function findAsync<T>(items: T[], test: (item: T) => Promise<boolean>): Promise<T> {
  for (const item of items) if (await test(item)) return item;
  throw new Error('none found');
}

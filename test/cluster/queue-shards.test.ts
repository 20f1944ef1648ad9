import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis } from '../../src/redis.js';
import { catalogQueues, shardOf } from '../../src/queues.js';
import { startRedisCluster, type RedisCluster } from '../helpers/redis-cluster.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

/**
 * QUEUE_SHARDS=6 on a real cluster of 3 masters: each shard's keys share one slot (no CROSSSLOT
 * from BullMQ's scripts), and the shards' tags put two shards on every master.
 */
let cluster: RedisCluster;
let s: TestStack;
beforeAll(async () => {
  cluster = await startRedisCluster();
  s = await startTestStack({
    env: {
      REDIS_CLUSTER_NODES: cluster.seeds,
      REDIS_PREFIX: `{t${randomBytes(4).toString('hex')}}`,
      QUEUE_SHARDS: '6',
      RATE_LIMIT_PER_MINUTE: '100000',
    },
    workers: ['ledger'],
  });
});
afterAll(async () => {
  await s?.close();
  await cluster?.destroy();
});

describe('QUEUE_SHARDS=6 on a 3-master Redis Cluster', () => {
  it('commits events of applications on every shard, with each master holding two shards’ keys', async () => {
    const apps: AppCredentials[] = [];
    while (new Set(apps.map((a) => shardOf(a.appId, 6))).size < 6) apps.push(await s.createApp());
    for (const a of apps) {
      const r = await s.request('POST', '/v1/events', { auth: a, body: { event_type: 'cluster.shard', payload: {} } });
      expect(r.status, r.text).toBe(201);
    }
    const shardNames = catalogQueues(s.deps.queues, 'ledger').map((q) => q.name);
    expect(shardNames).toHaveLength(6);
    const plain = s.config.REDIS_PREFIX.replace(/[{}]/g, '');
    const perMaster = await Promise.all(
      (await cluster.masters()).map(async (m) => {
        const c = createRedis(m.url, 'blocking');
        try {
          const keys = (await c.keys(`${plain}:q:*`)) as string[];
          return new Set(keys.map((k) => /:(ledger\.\dof6):/.exec(k)?.[1]).filter(Boolean)).size;
        } finally {
          c.disconnect();
        }
      }),
    );
    expect(perMaster).toEqual([2, 2, 2]);
  }, 60_000);
});

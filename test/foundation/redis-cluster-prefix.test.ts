import { randomBytes, randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { reserveSendSlot } from '../../src/platforms/rate-budget.js';
import { queuePrefix } from '../../src/queues.js';
import { createRedis, type Redis } from '../../src/redis.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startTestStack } from '../helpers/stack.js';

/**
 * A Redis in cluster mode with one node owning every slot: no redirections, so the service's
 * ordinary client talks to it, but Redis still refuses a multi-key command whose keys hash to
 * different slots (CROSSSLOT) — exactly what a real cluster would refuse.
 */
let cluster: RedisServer;
let admin: Redis;

beforeAll(async () => {
  cluster = await startRedisServer({ args: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'] });
  admin = createRedis(cluster.url, 'blocking');
  await admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
  const deadline = Date.now() + 10_000;
  while (!/cluster_state:ok/.test(String(await admin.call('CLUSTER', 'INFO')))) {
    if (Date.now() > deadline) throw new Error('single-node cluster did not become ready');
    await new Promise((r) => setTimeout(r, 50));
  }
});

afterAll(async () => {
  admin?.disconnect();
  await cluster?.destroy();
});

describe('REDIS_PREFIX with a Redis Cluster hash tag', () => {
  it('accepts one non-empty {tag} and refuses malformed braces', () => {
    expect(parseConfig({ REDIS_PREFIX: '{gw}' }).REDIS_PREFIX).toBe('{gw}');
    expect(parseConfig({ REDIS_PREFIX: 'prod:{gw}' }).REDIS_PREFIX).toBe('prod:{gw}');
    for (const bad of ['{}', '{gw', 'gw}', '{a}{b}', 'g w', ':{g w}']) {
      expect(() => parseConfig({ REDIS_PREFIX: bad }), bad).toThrow(/^REDIS_PREFIX: /);
    }
  });

  it('an untagged prefix spreads one BullMQ queue over several slots, which a cluster refuses', async () => {
    // A connection handed to BullMQ is the caller's to close: `queue.close()` leaves it open,
    // and once the server is gone it would reconnect for the rest of the test run.
    const connection = createRedis(cluster.url, 'blocking');
    const queue = new Queue('ledger', { connection, prefix: queuePrefix(`t${randomBytes(4).toString('hex')}`) });
    try {
      await expect(queue.add('ledger', { x: 1 })).rejects.toThrow(/CROSSSLOT/);
    } finally {
      await queue.close();
      connection.disconnect();
    }
  });

  it('with a {tag} prefix the service runs on the cluster: an event is enqueued, committed by the worker and answered 201', async () => {
    const s = await startTestStack({ env: { REDIS_URL: cluster.url, REDIS_PREFIX: `{t${randomBytes(4).toString('hex')}}` } });
    try {
      const app = await s.createApp();
      const created = await s.request('POST', '/v1/events', { auth: app, body: { event_type: 'cluster.check', payload: { n: 1 } } });
      expect(created.status).toBe(201);
      const listed = await s.request('GET', '/v1/events?limit=10', { auth: app });
      expect(listed.status).toBe(200);
      expect(listed.json.data.map((e: { id: string }) => e.id)).toEqual([created.json.id]);
      // Every key the service wrote carries the tag, so all of them sit in the one slot.
      const keys = (await admin.keys(`${s.config.REDIS_PREFIX}:*`)) as string[];
      expect(keys.length).toBeGreaterThan(0);
      const slots = new Set(await Promise.all(keys.map(async (k) => Number(await admin.call('CLUSTER', 'KEYSLOT', k)))));
      expect(slots.size).toBe(1);
      // Our own two-key script (a send's rate budget) runs there too.
      expect(await reserveSendSlot(s.deps.redis, s.config.REDIS_PREFIX, 'TELEGRAM', randomUUID(), 'chat-1')).toBe(0);
    } finally {
      await s.close();
    }
  });
});

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unavailable } from '../../src/errors.js';
import { enqueue } from '../../src/queues.js';
import { createDeps, closeDeps } from '../../src/deps.js';
import { createLogger } from '../../src/logger.js';
import { startWorkers } from '../../workers/index.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { createTestEnv, freePort, startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

let redis: RedisServer;
let s: TestStack;
let a: AppCredentials;

beforeAll(async () => {
  // This file's own redis-server: stopping it disturbs no one else.
  redis = await startRedisServer({ durable: true });
  s = await startTestStack({ env: { REDIS_URL: redis.url, EVENT_WAIT_MS: '5000' }, workers: ['ledger'] });
  a = await s.createApp();
});
afterAll(async () => {
  if (!redis.running()) await redis.start();
  await s.close();
  await redis.destroy();
});

const post = (n: number, headers: Record<string, string> = {}) =>
  s.request('POST', '/v1/events', { auth: a, body: { event_type: 'outage.probe', payload: { n } }, headers });
const timed = async <T>(f: () => Promise<T>) => {
  const t0 = Date.now();
  const value = await f();
  return { value, ms: Date.now() - t0 };
};
async function until<T>(f: () => Promise<T | undefined>, what: string, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('writes while Redis is down', () => {
  it('answer 503 UNAVAILABLE at once, lose nothing acknowledged, and recover without a restart', async () => {
    const before = await post(1);
    expect(before.status).toBe(201);

    await redis.stop('SIGKILL');
    for (let n = 2; n <= 6; n++) {
      const { value: r, ms } = await timed(() => post(n));
      expect(r.status).toBe(503);
      expect(r.json.error.code).toBe('UNAVAILABLE');
      expect(r.headers.get('retry-after')).toBe('1');
      // Bounded: the readiness wait (1 s) plus a little, never a hang until Redis returns.
      expect(ms).toBeLessThan(2_500);
    }
    const gql = await s.gql(a, 'mutation { createEvent(eventType: "outage.probe", payload: {n: 7}) { id } }');
    expect(gql.status).toBe(503);
    expect(gql.json.error.code).toBe('UNAVAILABLE');
    const ready = await s.request('GET', '/readyz');
    expect(ready.status).toBe(503);
    expect(ready.json.redis).toBe('down');

    await redis.start();
    const after = await until(async () => {
      const r = await post(8);
      return r.status === 201 ? r : r.status === 503 ? undefined : expect.fail(`unexpected ${r.status} ${r.text}`);
    }, 'the service to accept writes again');
    expect(after.json.payload).toEqual({ n: 8 });
    // Exactly the acknowledged writes are in the ledger: none of the refused ones slipped in later.
    await new Promise((r) => setTimeout(r, 500));
    const rows = await s.deps.sql<
      { n: number }[]
    >`SELECT (payload->>'n')::int AS n FROM events WHERE app_id = ${a.appId} AND event_type = 'outage.probe' ORDER BY seq`;
    expect(rows.map((r) => r.n)).toEqual([1, 8]);
  });

  it('keeps an event acknowledged 202 while its job waited out a Redis crash (appendfsync always)', async () => {
    // No ledger worker: the job stays queued, the answer is 202, then Redis crashes.
    const web = await startTestStack({ env: { REDIS_URL: redis.url, EVENT_WAIT_MS: '200' }, workers: false });
    try {
      const app = await web.createApp();
      const r = await web.request('POST', '/v1/events', { auth: app, body: { event_type: 'outage.queued', payload: {} } });
      expect(r.status).toBe(202);
      await redis.stop('SIGKILL');
      await redis.start();
      // A worker started after the crash finds the job and commits it.
      const worker = startWorkers(web.deps, ['ledger']);
      try {
        const committed = await until(async () => {
          const rows = await web.deps.sql`SELECT id FROM events WHERE app_id = ${app.appId} AND id = ${r.json.id}`;
          return rows.length ? rows : undefined;
        }, 'the queued event to commit');
        expect(committed).toHaveLength(1);
      } finally {
        await worker.close();
      }
    } finally {
      await web.close();
    }
  });
});

describe('enqueue', () => {
  it('throws UNAVAILABLE within the readiness bound when Redis was never reachable', async () => {
    const t = await createTestEnv({ REDIS_URL: `redis://127.0.0.1:${await freePort()}/0` });
    const deps = createDeps(t.config, { logger: createLogger('silent') });
    try {
      const event = { id: randomUUID(), app_id: randomUUID(), event_type: 'x', payload: {} };
      const { value: err, ms } = await timed(() =>
        enqueue(deps.queues, 'ledger', { event: { ...event, edges: [], attachments: [] } }).then(
          () => undefined,
          (e: unknown) => e,
        ),
      );
      expect(err).toMatchObject(unavailable('Redis'));
      expect(ms).toBeLessThan(2_000);
    } finally {
      // Nothing to drain: the connections never came up.
      for (const c of [deps.redis, deps.queueRedis]) c.disconnect();
      await closeDeps(deps).catch(() => {});
      await t.dropDatabase();
    }
  });
});

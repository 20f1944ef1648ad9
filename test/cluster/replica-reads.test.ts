import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/migrate.js';
import { createSubscription } from '../../src/webhooks/subscriptions.js';
import { startReplicatedPostgres, type ReplicatedPostgres } from '../helpers/postgres-replicated.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { until } from '../stream/helpers.js';

/**
 * Listings, by-id reads and GraphQL queries on a streaming replica (DATABASE_READ_URL), under
 * the one rule of src/replica-reads.ts. Replay paused on the replica shows who served a read:
 * a row the primary committed meanwhile is on the primary only.
 */
let pg: ReplicatedPostgres;
let s: TestStack;
let replica: postgres.Sql;

beforeAll(async () => {
  pg = await startReplicatedPostgres();
  await migrate(`${pg.primary.base}/gw`);
  s = await startTestStack({
    workers: false,
    env: { DATABASE_URL: `${pg.primary.base}/gw`, DATABASE_READ_URL: `${pg.standby.base}/gw` },
  });
  replica = postgres(`${pg.standby.base}/gw`, { max: 1, onnotice: () => {} });
}, 120_000);
afterAll(async () => {
  await replica?.end({ timeout: 1 });
  await s?.close();
  await pg?.destroy();
});

const servedBy = async (source: string) => {
  const text = await (await fetch(`${s.base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`db_replica_reads_total{served_by="${source}"} `));
  return line === undefined ? 0 : Number(line.split(' ')[1]);
};
const paused = async (on: boolean) => {
  await (on ? replica`SELECT pg_wal_replay_pause()` : replica`SELECT pg_wal_replay_resume()`);
  const want = on ? 'paused' : 'not paused';
  await until(async () => (await replica`SELECT pg_get_wal_replay_pause_state() AS s`)[0].s === want, 10_000, `replay ${want}`);
};
/** The replica has replayed everything the primary wrote so far. */
const caughtUp = async () => {
  const [{ lsn }] = await s.deps.sql<{ lsn: string }[]>`SELECT pg_current_wal_insert_lsn()::text AS lsn`;
  await until(
    async () => (await replica`SELECT pg_last_wal_replay_lsn() >= ${lsn}::pg_lsn AS ok`)[0].ok,
    10_000,
    'the replica to catch up',
  );
};
/** A subscription written the way a worker or another process writes: not through this application's requests. */
const writtenElsewhere = async (app: AppCredentials, name: string) => {
  const made = await createSubscription(s.deps, app.appId, { name, target_url: 'https://hooks.example.com/in', event_patterns: ['*'] });
  if (!made.ok) throw new Error(made.error.message);
  return made.value.id;
};
const listed = async (app: AppCredentials) => {
  const res = await s.request('GET', '/v1/webhook-subscriptions', { auth: app });
  expect(res.status).toBe(200);
  return res.json.data.map((w: { name: string }) => w.name);
};

describe('read-only requests on the replica', () => {
  it('a listing is served by the replica, a by-id miss there by the primary, and an application reads its own writes', async () => {
    const app = await s.createApp();
    await writtenElsewhere(app, 'a');
    await caughtUp();
    await paused(true);
    try {
      const b = await writtenElsewhere(app, 'b');
      // The listing comes from the replica: it has `a`, not `b`, which only the primary has.
      const replicaBefore = await servedBy('replica');
      expect(await listed(app)).toEqual(['a']);
      expect(await servedBy('replica')).toBe(replicaBefore + 1);

      // `b` by id misses on the replica and is found on the primary.
      const fallbackBefore = await servedBy('fallback');
      const byId = await s.request('GET', `/v1/webhook-subscriptions/${b}`, { auth: app });
      expect(byId.status).toBe(200);
      expect(byId.json.name).toBe('b');
      expect(await servedBy('fallback')).toBe(fallbackBefore + 1);
      // A row that exists nowhere is still a 404, after asking both.
      const none = await s.request('GET', '/v1/webhook-subscriptions/00000000-0000-4000-8000-000000000000', { auth: app });
      expect(none.status).toBe(404);

      // The application writes through the API: its next listing sees that write (and `b`)
      // from the primary, since the replica has not replayed it.
      const made = await s.request('POST', '/v1/webhook-subscriptions', {
        auth: app,
        body: { name: 'c', target_url: 'https://hooks.example.com/in', event_patterns: ['*'] },
      });
      expect(made.status).toBe(201);
      const writtenBefore = await servedBy('written');
      expect(await listed(app)).toEqual(['a', 'b', 'c']);
      expect(await servedBy('written')).toBe(writtenBefore + 1);

      // Another application has written nothing: its reads stay on the replica meanwhile.
      const other = await s.createApp();
      const otherRes = await s.request('GET', '/v1/webhook-subscriptions', { auth: other });
      // Its own application row is not on the replica yet either; an empty listing is all it can tell.
      expect(otherRes.status).toBe(200);
      expect(otherRes.json.data).toEqual([]);
    } finally {
      await paused(false);
    }
    // Once the replica has replayed the write, the application reads from it again.
    await caughtUp();
    const replicaBefore = await servedBy('replica');
    expect(await listed(app)).toEqual(['a', 'b', 'c']);
    expect(await servedBy('replica')).toBe(replicaBefore + 1);
  });

  it('GraphQL queries read from the replica, a null by-id field is asked of the primary, mutations mark a write', async () => {
    const app = await s.createApp();
    await writtenElsewhere(app, 'x');
    await caughtUp();
    await paused(true);
    try {
      const y = await writtenElsewhere(app, 'y');
      const list = await s.gql(app, '{ webhookSubscriptions { name } }');
      expect(list.json.data.webhookSubscriptions.map((w: { name: string }) => w.name)).toEqual(['x']);

      const fallbackBefore = await servedBy('fallback');
      const one = await s.gql(app, 'query ($id: ID!) { webhookSubscription(id: $id) { name } }', { id: y });
      expect(one.json.data.webhookSubscription).toEqual({ name: 'y' });
      expect(await servedBy('fallback')).toBe(fallbackBefore + 1);

      const made = await s.gql(
        app,
        'mutation { createWebhookSubscription(name: "z", targetUrl: "https://hooks.example.com/in", eventPatterns: ["*"]) { name } }',
      );
      expect(made.json.data.createWebhookSubscription).toEqual({ name: 'z' });
      const after = await s.gql(app, '{ webhookSubscriptions { name } }');
      expect(after.json.data.webhookSubscriptions.map((w: { name: string }) => w.name)).toEqual(['x', 'y', 'z']);
    } finally {
      await paused(false);
    }
  });

  it('without the replica, listings, by-id reads and GraphQL queries are served by the primary and /readyz stays ready', async () => {
    const app = await s.createApp();
    const id = await writtenElsewhere(app, 'kept');
    await caughtUp();
    await pg.standby.stop('fast');
    const ready = await s.request('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json).toMatchObject({ status: 'ok', postgres: 'ok', postgres_replica: 'down' });
    expect(await listed(app)).toEqual(['kept']);
    const byId = await s.request('GET', `/v1/webhook-subscriptions/${id}`, { auth: app });
    expect(byId.status).toBe(200);
    const gql = await s.gql(app, '{ webhookSubscriptions { name } }');
    expect(gql.json).toEqual({ data: { webhookSubscriptions: [{ name: 'kept' }] } });
    const users = await s.request('GET', '/v1/users', { auth: app });
    expect(users.status).toBe(200);
    // The replica rests after its failure: reads skip it rather than each paying for a failed attempt.
    expect(await servedBy('resting')).toBeGreaterThan(0);
  });
});

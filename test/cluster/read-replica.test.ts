import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeCursor } from '../../src/ledger/cursor.js';
import { migrate } from '../../src/migrate.js';
import { startReplicatedPostgres, type ReplicatedPostgres } from '../helpers/postgres-replicated.js';
import { take } from '../helpers/sse.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { commit, parse, stream, until } from '../stream/helpers.js';

/**
 * Readers on a streaming replica (DATABASE_READ_URL) of a primary with a synchronous standby.
 * Replay paused on the replica is lag at its worst: commits go through (the primary waits for
 * the standby's flush, not its replay) while the replica shows none of them.
 */
let pg: ReplicatedPostgres;
let s: TestStack;
let replica: postgres.Sql;
let app: AppCredentials;

beforeAll(async () => {
  pg = await startReplicatedPostgres();
  await migrate(`${pg.primary.base}/gw`);
  s = await startTestStack({
    workers: ['ledger'],
    env: {
      DATABASE_URL: `${pg.primary.base}/gw`,
      DATABASE_READ_URL: `${pg.standby.base}/gw`,
      REPLICA_WAIT_MS: '200',
      // No periodic re-check: what a stream delivers comes from wakes and the replica rule alone.
      STREAM_RECHECK_MS: '3600000',
    },
  });
  replica = postgres(`${pg.standby.base}/gw`, { max: 1, onnotice: () => {} });
  app = await s.createApp();
}, 120_000);
afterAll(async () => {
  await replica?.end({ timeout: 1 });
  await s?.close();
  await pg?.destroy();
});

const onReplica = async (appId: string) => {
  const [{ n }] = await replica<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE app_id = ${appId}`;
  return n;
};
const metric = async (name: string) => {
  const text = await (await fetch(`${s.base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
};
const seqs = (cursors: string[]) =>
  cursors.map((c) => {
    const d = decodeCursor(c);
    if (!d.ok) throw new Error('bad cursor');
    return d.value.seq;
  });

describe('reads from a lagging replica', () => {
  it('a stream neither skips nor reorders while the replica lags, and pages and by-id reads see every event', async () => {
    const live = await stream(s.base, app);
    const [warm] = await commit(s.deps, app.appId, [{ payload: { i: 0 } }]);
    const [warmFrame] = await take(live, 1);
    expect(parse(warmFrame).id).toBe(warm);
    await until(async () => (await onReplica(app.appId)) === 1, 10_000, 'the replica to replay the first event');

    await replica`SELECT pg_wal_replay_pause()`;
    await until(async () => (await replica`SELECT pg_get_wal_replay_pause_state() AS s`)[0].s === 'paused', 10_000, 'replay paused');

    // Several commits, each with its wake, as the ledger worker makes them.
    const ids: string[] = [];
    for (let round = 1; round <= 5; round++)
      ids.push(
        ...(await commit(
          s.deps,
          app.appId,
          [1, 2, 3, 4].map((k) => ({ payload: { i: round * 10 + k } })),
        )),
      );
    const frames = (await take(live, ids.length)).map(parse);
    expect(frames.map((e) => e.id)).toEqual(ids);
    expect(seqs(frames.map((e) => e.cursor))).toEqual(ids.map((_, i) => 2 + i));
    // Delivered while the replica still had none of them: from the primary, after the bounded wait.
    expect(await onReplica(app.appId)).toBe(1);

    // A stream resuming from before the lag catches up through the same rule.
    const resumed = await stream(s.base, app, '', { headers: { 'Last-Event-ID': warmFrame.id! } });
    expect((await take(resumed, ids.length)).map((f) => parse(f).id)).toEqual(ids);

    // A page after a cursor the replica has not reached, and an event it has not replayed.
    const page = await s.request('GET', `/v1/events?after=${frames[4].cursor}`, { auth: app });
    expect(page.status).toBe(200);
    expect(page.json.data.map((e: { id: string }) => e.id)).toEqual(ids.slice(5));
    const made = await s.request('POST', '/v1/events', { auth: app, body: { event_type: 'order.placed', payload: { n: 1 } } });
    expect(made.status).toBe(201);
    const byId = await s.request('GET', `/v1/events/${made.json.id}`, { auth: app });
    expect(byId.status).toBe(200);
    expect(byId.json.cursor).toBe(made.json.cursor);
    expect(parse((await take(live, 1))[0]).id).toBe(made.json.id);
    // The same through GraphQL queries.
    const gql = await s.gql(
      app,
      'query ($after: String, $id: ID!) { events(after: $after) { edges { node { id } } } event(id: $id) { id } }',
      {
        after: frames[4].cursor,
        id: made.json.id,
      },
    );
    expect(gql.json.data.events.edges.map((e: { node: { id: string } }) => e.node.id)).toEqual([...ids.slice(5), made.json.id]);
    expect(gql.json.data.event).toEqual({ id: made.json.id });
    expect(await onReplica(app.appId)).toBe(1);

    expect(await metric('db_replica_lag_bytes')).toBeGreaterThan(0);
    expect(await metric('db_replica_lag_seconds')).toBeGreaterThan(0);
    const ready = await s.request('GET', '/readyz');
    expect(ready.json).toMatchObject({ status: 'ok', postgres_replica: 'ok' });

    await replica`SELECT pg_wal_replay_resume()`;
    await until(async () => (await metric('db_replica_lag_bytes')) === 0, 10_000, 'the replica to catch up');
    expect(await metric('db_replica_lag_seconds')).toBe(0);
    expect(await onReplica(app.appId)).toBe(ids.length + 2);
    const [after] = await commit(s.deps, app.appId, [{ payload: { i: 99 } }]);
    expect(parse((await take(live, 1))[0]).id).toBe(after);
    expect(parse((await take(resumed, 2))[1]).id).toBe(after);
    live.close();
    resumed.close();
  });

  it('streams stay exact while replay is paused and resumed again and again under commits', async () => {
    const other = await s.createApp();
    const live = await stream(s.base, other);
    const everyOther = await stream(s.base, other, '?eventTypes=even.*');
    const ids: string[] = [];
    const even: string[] = [];
    for (let round = 0; round < 12; round++) {
      if (round % 3 === 0) await replica`SELECT pg_wal_replay_pause()`;
      if (round % 3 === 2) await replica`SELECT pg_wal_replay_resume()`;
      const specs = [0, 1, 2].map((k) => ({ event_type: (round + k) % 2 ? 'odd.tick' : 'even.tick', payload: { round, k } }));
      const made = await commit(s.deps, other.appId, specs);
      ids.push(...made);
      even.push(...made.filter((_, k) => specs[k].event_type === 'even.tick'));
    }
    await replica`SELECT pg_wal_replay_resume()`;
    const all = (await take(live, ids.length)).map(parse);
    expect(all.map((e) => e.id)).toEqual(ids);
    expect(seqs(all.map((e) => e.cursor))).toEqual(ids.map((_, i) => i + 1));
    expect((await take(everyOther, even.length)).map((f) => parse(f).id)).toEqual(even);
    // Nothing more than those: a sentinel is the next frame on each.
    const [sentinel] = await commit(s.deps, other.appId, [{ event_type: 'even.end' }]);
    expect(parse((await take(live, 1))[0]).id).toBe(sentinel);
    expect(parse((await take(everyOther, 1))[0]).id).toBe(sentinel);
    live.close();
    everyOther.close();
  });

  it('without the replica the service stays ready and reads from the primary', async () => {
    const first = await s.request('GET', '/v1/events?limit=1', { auth: app });
    await pg.standby.stop('fast');
    const ready = await s.request('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.json).toMatchObject({ status: 'ok', postgres: 'ok', postgres_replica: 'down' });
    const page = await s.request('GET', `/v1/events?after=${first.json.next_cursor}&limit=3`, { auth: app });
    expect(page.status).toBe(200);
    expect(page.json.data).toHaveLength(3);
    const byId = await s.request('GET', `/v1/events/${first.json.data[0].id}`, { auth: app });
    expect(byId.status).toBe(200);
    // A stream starting now reads its backfill from the primary.
    const c = await stream(s.base, app);
    expect(await take(c, 10)).toHaveLength(10);
    c.close();
    expect(await metric('db_replica_lag_bytes')).toBeNaN();
  });
});

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { JOBS, type LedgerEvent, queueFor } from '../../src/queues.js';
import type { SseClient } from '../helpers/sse.js';
import { createTestEnv, freePort, spawnService, type AppCredentials, type ChildService, type TestEnv } from '../helpers/stack.js';
import { commit, parse, stream, until } from './helpers.js';
import { apiFetch } from '../helpers/openapi-contract.js';

let t: TestEnv;
let deps: Deps;
const webs: { proc: ChildService; base: string }[] = [];
const workers: ChildService[] = [];

beforeAll(async () => {
  t = await createTestEnv({
    LOG_LEVEL: 'info',
    WORKER_QUEUES: 'ledger',
    LEDGER_BATCH_MAX: '20',
    STREAM_RECHECK_MS: '300',
    STREAM_MAX_PER_APP: '12',
    STREAM_SLOT_LEASE_MS: '1500',
    STREAM_BACKFILL: '0',
  });
  deps = createDeps(t.config);
  for (let i = 0; i < 3; i++) {
    const port = await freePort();
    webs.push({ proc: spawnService('src/web.ts', { ...t.env, PORT: String(port) }), base: `http://127.0.0.1:${port}` });
  }
  workers.push(spawnService('workers/index.ts', t.env), spawnService('workers/index.ts', t.env));
  await Promise.all([...webs.map((w) => w.proc.waitFor(/web listening/)), ...workers.map((w) => w.waitFor(/workers started/))]);
}, 60_000);
afterAll(async () => {
  for (const p of [...webs.map((w) => w.proc), ...workers]) p.kill('SIGKILL');
  await closeDeps(deps);
  await t.dropDatabase();
});

const creds = (a: { appId: string; apiKey: string; keyId: string }): AppCredentials => ({
  ...a,
  headers: { Authorization: `Bearer ${a.apiKey}`, 'X-Service-App-ID': a.appId },
});
const pick = <T>(xs: T[]) => xs[Math.floor(Math.random() * xs.length)];

describe('two web processes', () => {
  it('every client that drops and resumes on either process sees exactly its filter of the ledger, in order, while workers commit and wakes are duplicated and lost', async () => {
    const app = creds(await createApplication(deps.sql, 'load', ['events:read']));
    const [user] = await deps.sql<{ id: string }[]>`INSERT INTO users (app_id) VALUES (${app.appId}) RETURNING id`;
    const pus = (
      await deps.sql<{ id: string }[]>`
      INSERT INTO platform_users (app_id, user_id, platform, external_id) VALUES
        (${app.appId}, ${user.id}, 'TELEGRAM', '1'), (${app.appId}, ${user.id}, 'SLACK', 'U1'), (${app.appId}, NULL, 'TELEGRAM', '2')
      RETURNING id`
    ).map((r) => r.id);
    const conv = randomUUID();
    const [marker] = await commit(deps, app.appId, [{ event_type: 'marker' }]);
    const [{ seq: markerSeq }] = await deps.sql<{ seq: number }[]>`SELECT seq FROM events WHERE id = ${marker}`;
    const markerCursor = (await apiFetch(`${webs[0].base}/v1/events/${marker}`, { headers: app.headers }).then((r) => r.json()))
      .cursor as string;

    type Attrs = { type: string; c: string | null; u: string | null };
    const randomEvent = (): LedgerEvent => {
      const a: Attrs = { type: pick(['order.placed', 'order.paid', 'ping', 'other.x']), c: pick([conv, null]), u: pick([...pus, null]) };
      return {
        id: randomUUID(),
        app_id: app.appId,
        event_type: a.type,
        payload: a,
        edges: a.u ? [{ edge_type: 'sent_by', target_node_type: 'platform_user', target_node_id: a.u }] : [],
        attachments: [],
        conversation_id: a.c,
      };
    };
    const filters: { q: string; want: (a: Attrs) => boolean }[] = [
      { q: '', want: () => true },
      { q: '', want: () => true },
      { q: 'eventTypes=order.*', want: (a) => a.type.startsWith('order.') },
      { q: `conversationId=${conv}`, want: (a) => a.c === conv },
      { q: `userId=${user.id}`, want: (a) => a.u === pus[0] || a.u === pus[1] },
      { q: `userId=${pus[2]}`, want: (a) => a.u === pus[2] },
      {
        q: `eventTypes=ping,order.paid&conversationId=${conv}&userId=${user.id}`,
        want: (a) => (a.type === 'ping' || a.type === 'order.paid') && a.c === conv && (a.u === pus[0] || a.u === pus[1]),
      },
    ];

    let producing = true;
    let produced = 0;
    let connections = 0;
    // Three producers enqueue to the ledger workers; one more commits without any wake (a lost wake).
    const producers = [0, 1, 2].map(async () => {
      while (produced < 1500) {
        const batch = Array.from({ length: 4 }, randomEvent);
        produced += batch.length;
        await queueFor(deps.queues, 'ledger').addBulk(
          batch.map((e) => ({ name: 'ledger', data: { event: e }, opts: { jobId: JOBS.ledger.jobId({ event: e }) } })),
        );
        await new Promise((r) => setTimeout(r, 25));
      }
    });
    const silent = (async () => {
      while (producing) {
        const e = randomEvent();
        await commit(deps, app.appId, [e], { wake: false });
        produced++;
        await new Promise((r) => setTimeout(r, 150));
      }
    })();
    // Duplicate, stale, future and garbage wakes on the application's channel.
    const channel = `${t.config.REDIS_PREFIX}:wake:${app.appId}`;
    const noise = (async () => {
      while (producing) {
        await deps.redis.publish(channel, pick(['1', String(markerSeq), '999999999', 'x']));
        await new Promise((r) => setTimeout(r, 10));
      }
    })();

    const received = filters.map(() => [] as string[]);
    // A last event every filter matches ends each client's reading (its id is known before it commits).
    const sentinel = randomUUID();
    const clients = filters.map(async (f, i) => {
      let cursor = markerCursor;
      for (;;) {
        const c: SseClient = await stream(pick(webs).base, app, f.q ? `?${f.q}` : '', { headers: { 'Last-Event-ID': cursor } });
        connections++;
        expect(c.status).toBe(200);
        const stopAt = producing ? Date.now() + 30 + Math.random() * 400 : Date.now() + 20_000;
        try {
          while (Date.now() < stopAt) {
            const frame = await c.next(Math.max(1, stopAt - Date.now())).catch(() => undefined);
            if (!frame) break;
            received[i].push(parse(frame).id);
            cursor = frame.id!;
            if (parse(frame).id === sentinel) return;
          }
        } finally {
          c.close();
        }
      }
    });

    await Promise.all(producers);
    producing = false;
    await Promise.all([silent, noise]);
    await until(
      async () => {
        const [{ n }] = await deps.sql<
          { n: number }[]
        >`SELECT count(*)::int AS n FROM events WHERE app_id = ${app.appId} AND seq > ${markerSeq}`;
        return n === produced;
      },
      30_000,
      'the workers to commit every event',
    );
    const both = [pus[0], pus[2]].map((id) => ({ edge_type: 'sent_by', target_node_type: 'platform_user' as const, target_node_id: id }));
    await commit(deps, app.appId, [
      { id: sentinel, event_type: 'order.paid', conversation_id: conv, payload: { sentinel: true }, edges: both },
    ]);
    await Promise.all(clients);

    const ledger = await deps.sql<
      { id: string; payload: Attrs }[]
    >`SELECT id, payload FROM events WHERE app_id = ${app.appId} AND seq > ${markerSeq} AND id <> ${sentinel} ORDER BY seq`;
    expect(ledger.length).toBe(produced);
    for (const [i, f] of filters.entries()) {
      const want = [...ledger.filter((e) => f.want(e.payload)).map((e) => e.id), sentinel];
      expect(received[i].length, f.q).toBe(want.length);
      expect(received[i], f.q).toEqual(want);
    }
    console.log(
      `two web processes: ${produced} events, ${connections} connections, ${received.reduce((n, r) => n + r.length, 0)} deliveries checked`,
    );
    expect(produced).toBeGreaterThanOrEqual(1500);
    expect(connections).toBeGreaterThan(50);
  }, 90_000);

  it("shares the per-application cap across processes, frees slots on disconnect and reclaims a killed process's slots", async () => {
    const app = creds(await createApplication(deps.sql, 'slots', ['events:read']));
    const [a, b, victim] = webs;
    const open: SseClient[] = [];
    for (let i = 0; i < 12; i++) {
      const c = await stream([a, b, victim][i % 3].base, app);
      expect(c.status).toBe(200);
      open.push(c);
    }
    for (const w of [a, b, victim]) {
      const r = await stream(w.base, app);
      expect(r.status).toBe(429);
      expect(JSON.parse(r.text!).error.code).toBe('TOO_MANY_STREAMS');
    }
    // Another application is not affected.
    const other = creds(await createApplication(deps.sql, 'other', ['events:read']));
    const o = await stream(b.base, other);
    expect(o.status).toBe(200);
    o.close();

    // Disconnecting on one process frees a slot for the other.
    open.shift()!.close();
    let c = await stream(b.base, app);
    await until(async () => c.status === 200 || (c = await stream(b.base, app)).status === 200, 5000, 'the freed slot');
    open.push(c);

    // The victim holds 4 slots; killed without a chance to release them, they lapse with their lease.
    victim.proc.kill('SIGKILL');
    await victim.proc.exited;
    expect((await stream(a.base, app)).status).toBe(429);
    const t0 = Date.now();
    let reclaimed = 0;
    await until(
      async () => {
        const r = await stream(pick([a, b]).base, app);
        if (r.status === 200) {
          reclaimed++;
          open.push(r);
        }
        return reclaimed === 4;
      },
      10_000,
      'the killed process slots to come back',
    );
    expect(Date.now() - t0).toBeLessThan(t.config.STREAM_SLOT_LEASE_MS * 3);
    expect((await stream(a.base, app)).status).toBe(429);
    for (const x of open) x.close();
  }, 60_000);
});

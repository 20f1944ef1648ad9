import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { listEvents } from '../../src/ledger/read.js';
import { writeEvents } from '../../src/ledger/write.js';
import { JOBS, type LedgerEvent, queueFor } from '../../src/queues.js';
import { ledgerProcessor } from '../../workers/ledger.js';
import { createWorkerServices, type WorkerServices } from '../../workers/services.js';
import { createTestEnv, spawnService, type ChildService, type TestEnv } from '../helpers/stack.js';

let t: TestEnv;
let deps: Deps;
let services: WorkerServices;
let workers: ChildService[] = [];

beforeAll(async () => {
  t = await createTestEnv({ LOG_LEVEL: 'info', WORKER_QUEUES: 'ledger', LEDGER_BATCH_MAX: '50' });
  deps = createDeps(t.config);
  services = createWorkerServices(deps, ['ledger']);
});
afterAll(async () => {
  for (const w of workers) w.kill('SIGKILL');
  await services.close();
  await closeDeps(deps);
  await t.dropDatabase();
});

const event = (appId: string, i: number): LedgerEvent => ({
  id: randomUUID(),
  app_id: appId,
  event_type: 'load.tick',
  payload: { i },
  edges: [],
  attachments: [],
});

describe('the ledger invariant', () => {
  it('a reader paging by cursor while 3 worker processes commit sees every event once, in final ledger order', async () => {
    workers = [0, 1, 2].map(() => spawnService('workers/index.ts', t.env));
    await Promise.all(workers.map((w) => w.waitFor(/workers started/)));
    const apps = await Promise.all([0, 1].map((i) => createApplication(deps.sql, `inv-${i}`, ['events:read'])));

    const seen = new Map<string, string[]>(apps.map((a) => [a.appId, []]));
    const after = new Map<string, number | undefined>(apps.map((a) => [a.appId, undefined]));
    let producing = true;
    let produced = 0;

    const readOnce = async (appId: string) => {
      for (;;) {
        const page = await listEvents(deps.sql, appId, { afterSeq: after.get(appId) }, 37);
        if (page.length === 0) return;
        seen.get(appId)!.push(...page.map((e) => e.id));
        after.set(appId, page.at(-1)!.seq);
      }
    };
    const reader = (async () => {
      while (producing) for (const a of apps) await readOnce(a.appId);
    })();

    // Paced producers: a steady load the workers keep up with, so the run is about
    // concurrency between committing transactions, not about draining a backlog.
    const producers = [0, 1, 2].map(async (p) => {
      const until = Date.now() + 10_000;
      while (Date.now() < until) {
        const batch = Array.from({ length: 10 }, (_, i) => event(apps[(p + i) % 2].appId, produced + i));
        produced += batch.length;
        // One producer enqueues as a web process does (its 10 events in one job), the others one job per event.
        if (p === 2)
          await queueFor(deps.queues, 'ledger').add('ledger', { events: batch }, { jobId: JOBS.ledger.jobId({ events: batch }) });
        else
          await queueFor(deps.queues, 'ledger').addBulk(
            batch.map((e) => ({ name: 'ledger', data: { event: e }, opts: { jobId: JOBS.ledger.jobId({ event: e }) } })),
          );
        await new Promise((r) => setTimeout(r, 40));
      }
    });
    await Promise.all(producers);
    const drainStart = Date.now();

    // Let the workers drain, then the reader catch up to the end.
    for (;;) {
      const [{ n }] = await deps.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events`;
      if (n >= produced) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    producing = false;
    console.log(`invariant: ${produced} events, drained ${Date.now() - drainStart} ms after load stopped`);
    await reader;
    for (const a of apps) await readOnce(a.appId);

    let total = 0;
    for (const a of apps) {
      const final = await deps.sql<{ id: string }[]>`SELECT id FROM events WHERE app_id = ${a.appId} ORDER BY created_at, id`;
      const got = seen.get(a.appId)!;
      expect(new Set(got).size).toBe(got.length);
      expect(got).toEqual(final.map((r) => r.id));
      total += got.length;
    }
    expect(total).toBe(produced);
    expect(produced).toBeGreaterThan(1000);
    // created_at strictly increases within an application (its head row); two applications may share a microsecond.
    const [{ batches }] = await deps.sql<{ batches: number }[]>`SELECT count(DISTINCT (app_id, created_at))::int AS batches FROM events`;
    expect(batches).toBe(total);
  }, 60_000);

  it('a ledger job retried after its commit writes nothing twice', async () => {
    const app = await createApplication(deps.sql, 'retry', ['events:read']);
    const e = event(app.appId, 1);
    const run = ledgerProcessor.create(deps, services);
    const job = { data: { event: e } } as Parameters<typeof run>[0];
    const first = (await run(job)) as { seq: number };
    const second = (await run(job)) as { seq: number };
    expect(second.seq).toBe(first.seq);
    const again = await writeEvents(deps.sql, [e, e]);
    const [stored] = await listEvents(deps.sql, app.appId, {}, 1);
    expect(again).toEqual([
      {
        id: e.id,
        app_id: app.appId,
        seq: first.seq,
        created_at: stored.created_at,
        event_type: 'load.tick',
        event_alias: null,
        channels: [],
        conversation_id: null,
      },
    ]);
    const [{ n }] = await deps.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE app_id = ${app.appId}`;
    expect(n).toBe(1);
  });

  it("a web process's batch job retried after its commit writes no event and no edge twice", async () => {
    const app = await createApplication(deps.sql, 'retry-batch', ['events:read']);
    const edge = { edge_type: 'about', target_node_type: 'file' as const, target_node_id: randomUUID() };
    const events = [0, 1, 2].map((i) => ({ ...event(app.appId, i), edges: [edge, { ...edge, edge_type: 'also' }] }));
    const run = ledgerProcessor.create(deps, services);
    const job = { data: { events, reply_to: 'web-1' } } as Parameters<typeof run>[0];
    const first = (await run(job)) as { seqs: number[] };
    const second = (await run(job)) as { seqs: number[] };
    expect(first.seqs).toEqual([1, 2, 3]);
    expect(second.seqs).toEqual(first.seqs);
    const [{ n, edges }] = await deps.sql<{ n: number; edges: number }[]>`
      SELECT (SELECT count(*)::int FROM events WHERE app_id = ${app.appId}) AS n,
             (SELECT count(*)::int FROM event_edges WHERE app_id = ${app.appId}) AS edges`;
    expect({ n, edges }).toEqual({ n: 3, edges: 6 });
    const read = await listEvents(deps.sql, app.appId, {}, 10);
    expect(read.map((e) => e.edges.map((x) => x.edge_type))).toEqual([
      ['about', 'also'],
      ['about', 'also'],
      ['about', 'also'],
    ]);
  });

  it('keeps created_at strictly increasing with seq inside a batch and across batches', async () => {
    const app = await createApplication(deps.sql, 'mono', ['events:read']);
    await writeEvents(
      deps.sql,
      Array.from({ length: 30 }, (_, i) => event(app.appId, i)),
    );
    await writeEvents(
      deps.sql,
      Array.from({ length: 5 }, (_, i) => event(app.appId, i)),
    );
    const rows = await deps.sql<{ ok: boolean }[]>`
      SELECT bool_and(created_at > prev_at) AS ok FROM (
        SELECT created_at, lag(created_at) OVER (ORDER BY seq) AS prev_at FROM events WHERE app_id = ${app.appId}) x
      WHERE prev_at IS NOT NULL`;
    expect(rows[0].ok).toBe(true);
  });
});

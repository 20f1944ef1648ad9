/**
 * Scale-out: the same ingest measured with 1 web + 1 worker process and with 2 web + 2 worker
 * processes in one run (the two take turns, round after round), and where the single-application ordering point (the row lock on the
 * application's `ledger_heads` row, src/ledger/write.ts) caps the ledger: one application
 * against many, at three depths —
 *   - HTTP: POST /v1/events (201 after the commit), closed-loop clients spread round-robin over
 *     the web processes, all on one application or each client on its own;
 *   - ledger worker: a backlog of events put straight onto the paused ledger queue, then the
 *     worker processes drain it (their commit rate, without HTTP in the way);
 *   - the write itself: concurrent writeEvents() calls from the bench process, all for one
 *     application (they queue on its row lock) or one application each.
 * The baseline of every 2 + 2 figure is the same figure at 1 + 1 in the same run; the
 * baseline of every one-application figure is the many-application one.
 *
 * See docs/SCALING.md for what the figures mean.
 */
import { randomUUID } from 'node:crypto';
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import { writeEvents } from '../src/ledger/write.js';
import { JOBS, queueFor, type LedgerEvent, type Queues } from '../src/queues.js';
import { createApplication } from '../src/apps/applications.js';
import { createSql, type Sql } from '../src/db.js';
import { createBenchDatabase, ratio, round, runLoad, stackQueues, startStack, until, type Bench, type BenchStack } from './lib.js';

/** Applications of the many-application phases: one per client up to this many. */
const MANY_APPS = 32;
const WRITERS = 4;
const WRITE_BATCH = 50;
/** Rounds in which the two topologies take turns; figures are the medians. */
const ROUNDS = 3;

type App = { appId: string; headers: Record<string, string> };

const payload = (i: number) => ({ i, order_id: `ord-${i}`, amount: i % 1000, note: 'a small realistic payload' });
const ledgerEvent = (appId: string, i: number): LedgerEvent => ({
  id: randomUUID(),
  app_id: appId,
  event_type: 'bench.scale',
  payload: payload(i),
  edges: [],
  attachments: [],
});

/**
 * Events committed so far for these applications: the sum of their ledger heads (`seq` counts an
 * application's events). Polled every 100 ms while a drain runs, so it must not cost what a
 * count(*) over a growing table would: that would take CPU from the system being measured.
 */
const countEvents = async (stack: BenchStack, appIds: string[]) =>
  (await stack.sql<{ n: number }[]>`SELECT coalesce(sum(seq), 0)::int AS n FROM ledger_heads WHERE app_id = ANY(${appIds}::uuid[])`)[0].n;

/** POST /v1/events over every web process; committed rows counted over exactly the measured window. */
async function httpIngest(stack: BenchStack, apps: App[], clients: number, durationS: number) {
  const warmupS = 2;
  const ids = apps.map((a) => a.appId);
  let atStart = 0;
  let atEnd = 0;
  const marks = [
    new Promise<void>((r) =>
      setTimeout(async () => {
        atStart = await countEvents(stack, ids);
        r();
      }, warmupS * 1000),
    ),
    new Promise<void>((r) =>
      setTimeout(
        async () => {
          atEnd = await countEvents(stack, ids);
          r();
        },
        (warmupS + durationS) * 1000,
      ),
    ),
  ];
  const load = await runLoad(stack.bases, {
    clients,
    durationS,
    warmupS,
    request: (i, client) => ({
      method: 'POST',
      path: '/v1/events',
      headers: { 'content-type': 'application/json', ...apps[client % apps.length].headers },
      body: JSON.stringify({ event_type: 'bench.scale', payload: payload(i) }),
    }),
  });
  await Promise.all(marks);
  return { committedPerS: round((atEnd - atStart) / durationS, 1), p99Ms: load.p99Ms, errors: load.errors, statuses: load.statuses };
}

/**
 * A backlog of `total` events on the paused ledger queue, spread over `appIds`, then drained by
 * the worker processes: commits per second over the middle 80% of the events' created_at.
 */
async function ledgerDrain(stack: BenchStack, queues: Queues, appIds: string[], total: number) {
  const shards = queues.shards.ledger;
  await Promise.all(shards.map((q) => q.pause()));
  const ids: string[] = [];
  for (let i = 0; i < total; i += 1000) {
    const jobs = Array.from({ length: Math.min(1000, total - i) }, (_, k) => {
      const event = ledgerEvent(appIds[(i + k) % appIds.length], i + k);
      ids.push(event.id);
      return {
        queue: queueFor(queues, 'ledger', event.app_id),
        job: { name: 'ledger', data: { event }, opts: { jobId: JOBS.ledger.jobId({ event }) } },
      };
    });
    // Each job on the shard of its application, as the web process would put it.
    await Promise.all(shards.map((q) => q.addBulk(jobs.filter((j) => j.queue === q).map((j) => j.job))));
  }
  const before = await countEvents(stack, appIds);
  await Promise.all(shards.map((q) => q.resume()));
  const drained = await until(async () => (await countEvents(stack, appIds)) - before >= total, 300_000, 100);
  const created = (
    await stack.sql<
      { t: number }[]
    >`SELECT extract(epoch FROM created_at)::float8 * 1000 AS t FROM events WHERE id = ANY(${ids}::uuid[]) ORDER BY created_at`
  ).map((r) => r.t);
  const lo = Math.floor(created.length * 0.1);
  const hi = Math.floor(created.length * 0.9) - 1;
  const perS = hi > lo && created[hi] > created[lo] ? round(((hi - lo) * 1000) / (created[hi] - created[lo]), 1) : null;
  return { perS, drained };
}

/** writeEvents() from `WRITERS` concurrent callers for `durationS`: all on one application, or one application each. */
async function directWrites(sql: Sql, appIds: string[], durationS: number): Promise<number | null> {
  let rows = 0;
  let i = 0;
  const end = performance.now() + durationS * 1000;
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, w) => {
      while (performance.now() < end) {
        const appId = appIds[w % appIds.length];
        await writeEvents(
          sql,
          Array.from({ length: WRITE_BATCH }, () => ledgerEvent(appId, i++)),
        );
        if (performance.now() <= end) rows += WRITE_BATCH;
      }
    }),
  );
  return round(rows / durationS, 1);
}

interface Topology {
  n: number;
  tag: string;
  stack: BenchStack;
  queues: ReturnType<typeof stackQueues>;
  one: App[];
  many: App[];
}

const median = (xs: (number | null)[]): number | null => {
  const v = xs.filter((x): x is number => x !== null).sort((a, b) => a - b);
  return v.length ? (v.length % 2 ? v[(v.length - 1) / 2] : round((v[v.length / 2 - 1] + v[v.length / 2]) / 2, 1)) : null;
};

const bench: Bench = {
  description:
    'ingest with 2 web + 2 worker processes vs 1 + 1, and one application (its ledger row lock) vs many, over HTTP, through the ledger worker and at the write',
  async run({ options, log }) {
    const clients = options.clients ?? 32;
    const durationS = options.durationS ?? 6;
    const backlog = 1000 * durationS;
    const rounds = ROUNDS;
    const m = Math.min(MANY_APPS, clients);
    /** Every sample of every figure, one per round; reported as the median, with the range in the notes. */
    const samples = new Map<string, (number | null)[]>();
    const record = (name: string, v: number | null) => samples.set(name, [...(samples.get(name) ?? []), v]);
    const statuses: string[] = [];

    // Both topologies run side by side and take turns, round after round, so that the load other
    // work puts on this shared machine drifts over both alike instead of over one of them.
    log(`starting 1 web + 1 worker and 2 web + 2 worker processes (ledger queue), each on its own database`);
    const topologies: Topology[] = [];
    // The writeEvents() phase gets a database of its own: the many rows it writes would otherwise
    // grow one topology's tables (and slow its later rounds) and not the other's.
    const writeDb = await createBenchDatabase();
    const writeSql = createSql(writeDb.url, { max: WRITERS + 2 });
    try {
      const writers = await Promise.all(
        Array.from({ length: WRITERS }, (_, k) => createApplication(writeSql, `bench-writer-${k}`, ['events:write'])),
      );
      for (const n of [1, 2]) {
        const stack = await startStack({ webProcesses: n, workerProcesses: n, workerQueues: 'ledger' });
        topologies.push({ n, tag: `${n}x${n}`, stack, queues: stackQueues(stack), one: [], many: [] });
        topologies.at(-1)!.one = [await stack.createApp(['events:write'])];
        topologies.at(-1)!.many = await Promise.all(Array.from({ length: m }, () => stack.createApp(['events:write'])));
      }
      for (let r = 1; r <= rounds; r++) {
        for (const t of topologies) {
          log(
            `round ${r}/${rounds}, ${t.n} + ${t.n}: HTTP on one application, on ${m}, ${durationS} s each; ledger drains of ${backlog} events`,
          );
          const h1 = await httpIngest(t.stack, t.one, clients, durationS);
          const hm = await httpIngest(t.stack, t.many, clients, durationS);
          const d1 = await ledgerDrain(
            t.stack,
            t.queues.queues,
            t.one.map((a) => a.appId),
            backlog,
          );
          const dm = await ledgerDrain(
            t.stack,
            t.queues.queues,
            t.many.map((a) => a.appId),
            backlog,
          );
          record(`http_1app_${t.tag}_committed_per_s`, h1.committedPerS);
          record(`http_1app_${t.tag}_post_p99_ms`, h1.p99Ms);
          record(`http_${m}apps_${t.tag}_committed_per_s`, hm.committedPerS);
          record(`http_${m}apps_${t.tag}_post_p99_ms`, hm.p99Ms);
          record(`drain_1app_${t.tag}_committed_per_s`, d1.perS);
          record(`drain_${m}apps_${t.tag}_committed_per_s`, dm.perS);
          statuses.push(
            `round ${r} ${t.n} + ${t.n}: one application ${JSON.stringify(h1.statuses)}, ${m} applications ${JSON.stringify(hm.statuses)}${d1.drained && dm.drained ? '' : '; a drain did not finish within 300 s'}`,
          );
          if (t.n === 1) {
            record(
              'write_1app_rows_per_s',
              await directWrites(
                writeSql,
                writers.slice(0, 1).map((a) => a.appId),
                durationS,
              ),
            );
            record(
              `write_${WRITERS}apps_rows_per_s`,
              await directWrites(
                writeSql,
                writers.map((a) => a.appId),
                durationS,
              ),
            );
          }
        }
      }
    } finally {
      for (const t of topologies) {
        await t.queues.close();
        await t.stack.stop();
      }
      await writeSql.end({ timeout: 5 });
      await writeDb.drop();
    }

    const figures = Object.fromEntries([...samples].map(([k, v]) => [k, median(v)]));
    const scaled = [`http_1app`, `http_${m}apps`, `drain_1app`, `drain_${m}apps`].map((p) => [
      `${p}_2x2_committed_per_s`,
      `${p}_1x1_committed_per_s`,
    ]);
    const oneVsMany = [
      [`http_1app_1x1_committed_per_s`, `http_${m}apps_1x1_committed_per_s`],
      [`http_1app_2x2_committed_per_s`, `http_${m}apps_2x2_committed_per_s`],
      [`drain_1app_1x1_committed_per_s`, `drain_${m}apps_1x1_committed_per_s`],
      [`drain_1app_2x2_committed_per_s`, `drain_${m}apps_2x2_committed_per_s`],
      ['write_1app_rows_per_s', `write_${WRITERS}apps_rows_per_s`],
    ];
    const ratios = Object.fromEntries([...scaled, ...oneVsMany].map(([a, b]) => [`${a}_vs_${b}`, ratio(figures[a], figures[b])]));
    const ranges = [...samples].map(([k, v]) => `${k} ${v.map((x) => x ?? 'n/a').join(' / ')}`);
    // The 1 + 1 and many-application figures are the baselines of the others: listed once, as figures.
    return {
      figures,
      baselines: {},
      ratios,
      targets: {},
      notes: [
        `each figure is the median of ${rounds} rounds; in every round the 1 + 1 and the 2 + 2 stacks (started together, each on its own database and Redis prefix) take turns`,
        `http: ${clients} closed-loop clients spread round-robin over the web processes, ${durationS} s measured after 2 s warm-up; POST /v1/events answers 201 after the ledger commit; committed = rows counted over the measured window`,
        `drain: ${backlog} events added to the paused ledger queue, then resumed; rate over the middle 80% of their created_at`,
        `write: ${WRITERS} concurrent writeEvents() calls of ${WRITE_BATCH} events each from the bench process, on one application (they take turns on its ledger_heads row) or on ${WRITERS} (one each), in a database of their own`,
        `every process (web, workers, load generator, PostgreSQL, Redis) shares this machine's ${cpus().length} CPUs: 2 + 2 adds processes, not cores`,
        `samples per round: ${ranges.join('; ')}`,
        `HTTP statuses: ${statuses.join('; ')}`,
      ],
    };
  },
};

export default bench;

/**
 * Scale-out: the same ingest measured with 1 web + 1 worker process and with 2 web + 2 worker
 * processes in one run, and where the single-application ordering point (the row lock on the
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
import { Queue } from 'bullmq';
import { writeEvents } from '../src/ledger/write.js';
import { JOBS, queuePrefix, type LedgerEvent } from '../src/queues.js';
import { createRedis } from '../src/redis.js';
import { ratio, round, runLoad, startStack, until, type Bench, type BenchStack } from './lib.js';

/** Applications of the many-application phases: one per client up to this many. */
const MANY_APPS = 32;
const WRITERS = 4;
const WRITE_BATCH = 50;

const payload = (i: number) => ({ i, order_id: `ord-${i}`, amount: i % 1000, note: 'a small realistic payload' });
const ledgerEvent = (appId: string, i: number): LedgerEvent => ({
  id: randomUUID(),
  app_id: appId,
  event_type: 'bench.scale',
  payload: payload(i),
  edges: [],
  attachments: [],
});

const countEvents = async (stack: BenchStack, appIds: string[]) =>
  (await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE app_id = ANY(${appIds}::uuid[])`)[0].n;

/** POST /v1/events over every web process; committed rows counted over exactly the measured window. */
async function httpIngest(stack: BenchStack, apps: { appId: string; headers: Record<string, string> }[], clients: number, durationS: number) {
  const warmupS = 2;
  const ids = apps.map((a) => a.appId);
  let atStart = 0;
  let atEnd = 0;
  const marks = [
    new Promise<void>((r) => setTimeout(async () => { atStart = await countEvents(stack, ids); r(); }, warmupS * 1000)),
    new Promise<void>((r) => setTimeout(async () => { atEnd = await countEvents(stack, ids); r(); }, (warmupS + durationS) * 1000)),
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
async function ledgerDrain(stack: BenchStack, queue: Queue, appIds: string[], total: number) {
  await queue.pause();
  const ids: string[] = [];
  for (let i = 0; i < total; i += 1000) {
    const jobs = Array.from({ length: Math.min(1000, total - i) }, (_, k) => {
      const event = ledgerEvent(appIds[(i + k) % appIds.length], i + k);
      ids.push(event.id);
      return { name: 'ledger', data: { event }, opts: { jobId: JOBS.ledger.jobId({ event }) } };
    });
    await queue.addBulk(jobs);
  }
  const before = await countEvents(stack, appIds);
  await queue.resume();
  const drained = await until(async () => (await countEvents(stack, appIds)) - before >= total, 300_000, 100);
  const created = (
    await stack.sql<{ t: number }[]>`SELECT extract(epoch FROM created_at)::float8 * 1000 AS t FROM events WHERE id = ANY(${ids}::uuid[]) ORDER BY created_at`
  ).map((r) => r.t);
  const lo = Math.floor(created.length * 0.1);
  const hi = Math.floor(created.length * 0.9) - 1;
  const perS = hi > lo && created[hi] > created[lo] ? round(((hi - lo) * 1000) / (created[hi] - created[lo]), 1) : null;
  return { perS, drained };
}

/** writeEvents() from `WRITERS` concurrent callers for `durationS`: all on one application, or one application each. */
async function directWrites(stack: BenchStack, appIds: string[], durationS: number): Promise<number | null> {
  let rows = 0;
  let i = 0;
  const end = performance.now() + durationS * 1000;
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, w) => {
      while (performance.now() < end) {
        const appId = appIds[w % appIds.length];
        await writeEvents(stack.sql, Array.from({ length: WRITE_BATCH }, () => ledgerEvent(appId, i++)));
        if (performance.now() <= end) rows += WRITE_BATCH;
      }
    }),
  );
  return round(rows / durationS, 1);
}

const bench: Bench = {
  description: 'ingest with 2 web + 2 worker processes vs 1 + 1, and one application (its ledger row lock) vs many, over HTTP, through the ledger worker and at the write',
  async run({ options, log }) {
    const clients = options.clients ?? 32;
    const durationS = options.durationS ?? 10;
    const backlog = 1000 * durationS;
    const figures: Record<string, number | null> = {};
    const notes: string[] = [];

    for (const n of [1, 2]) {
      const tag = `${n}x${n}`;
      log(`${n} web + ${n} worker process(es) (ledger queue)`);
      const stack = await startStack({ webProcesses: n, workerProcesses: n, workerQueues: 'ledger' });
      const queue = new Queue('ledger', { connection: createRedis(stack.env.REDIS_URL, 'blocking'), prefix: queuePrefix(stack.env.REDIS_PREFIX) });
      try {
        const one = [await stack.createApp(['events:write'])];
        const many = await Promise.all(Array.from({ length: Math.min(MANY_APPS, clients) }, () => stack.createApp(['events:write'])));

        log(`  HTTP, one application, ${clients} clients, ${durationS} s`);
        const h1 = await httpIngest(stack, one, clients, durationS);
        log(`  HTTP, ${many.length} applications, ${clients} clients, ${durationS} s`);
        const hm = await httpIngest(stack, many, clients, durationS);
        log(`  ledger drain of ${backlog} events, one application`);
        const d1 = await ledgerDrain(stack, queue, one.map((a) => a.appId), backlog);
        log(`  ledger drain of ${backlog} events, ${many.length} applications`);
        const dm = await ledgerDrain(stack, queue, many.map((a) => a.appId), backlog);

        Object.assign(figures, {
          [`http_1app_${tag}_committed_per_s`]: h1.committedPerS,
          [`http_1app_${tag}_post_p99_ms`]: h1.p99Ms,
          [`http_${many.length}apps_${tag}_committed_per_s`]: hm.committedPerS,
          [`http_${many.length}apps_${tag}_post_p99_ms`]: hm.p99Ms,
          [`drain_1app_${tag}_committed_per_s`]: d1.perS,
          [`drain_${many.length}apps_${tag}_committed_per_s`]: dm.perS,
        });
        notes.push(
          `${n} + ${n}: HTTP statuses, one application ${JSON.stringify(h1.statuses)}, ${many.length} applications ${JSON.stringify(hm.statuses)}` +
            (d1.drained && dm.drained ? '' : '; a drain did not finish within 300 s'),
        );

        if (n === 1) {
          log(`  writeEvents(), ${WRITERS} concurrent writers × ${WRITE_BATCH} events, one application then one each, ${durationS} s`);
          const w1 = await directWrites(stack, one.map((a) => a.appId), durationS);
          const wm = await directWrites(stack, many.slice(0, WRITERS).map((a) => a.appId), durationS);
          Object.assign(figures, { write_1app_rows_per_s: w1, [`write_${WRITERS}apps_rows_per_s`]: wm });
        }
      } finally {
        await queue.close();
        await stack.stop();
      }
    }

    const m = Math.min(MANY_APPS, clients);
    const scaled = [`http_1app`, `http_${m}apps`, `drain_1app`, `drain_${m}apps`].map((p) => [`${p}_2x2_committed_per_s`, `${p}_1x1_committed_per_s`]);
    const oneVsMany = [
      [`http_1app_1x1_committed_per_s`, `http_${m}apps_1x1_committed_per_s`],
      [`drain_1app_1x1_committed_per_s`, `drain_${m}apps_1x1_committed_per_s`],
      [`drain_1app_2x2_committed_per_s`, `drain_${m}apps_2x2_committed_per_s`],
      ['write_1app_rows_per_s', `write_${WRITERS}apps_rows_per_s`],
    ];
    const ratios = Object.fromEntries([...scaled, ...oneVsMany].map(([a, b]) => [`${a}_vs_${b}`, ratio(figures[a], figures[b])]));
    // The 1 + 1 and many-application figures are the baselines of the others: listed once, as figures.
    return {
      figures,
      baselines: {},
      ratios,
      targets: {},
      notes: [
        `${clients} closed-loop clients spread round-robin over the web processes, ${durationS} s measured after 2 s warm-up; POST /v1/events answers 201 after the ledger commit; committed = rows counted over the measured window`,
        `drain: ${backlog} events added to the paused ledger queue, then resumed; rate over the middle 80% of their created_at`,
        `write: ${WRITERS} concurrent writeEvents() calls of ${WRITE_BATCH} events each from the bench process, on one application (they take turns on its ledger_heads row) or on ${WRITERS} (one each)`,
        `every process (web, workers, load generator, PostgreSQL, Redis) shares this machine's ${cpus().length} CPUs: 2 + 2 adds processes, not cores`,
        ...notes,
      ],
    };
  },
};

export default bench;

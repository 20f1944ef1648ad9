/**
 * Webhooks: events committed through the ledger worker at a steady rate, each matching 10
 * subscriptions whose receivers (loopback, answering 200) record arrival times. Measured:
 * deliveries/s sustained under a rate above capacity, and event-commit → receipt latency
 * p50/p99 under a steady rate the system keeps up with. Floor, same run: the same number of
 * signed POSTs sent by a bare undici loop with the same concurrency from its own process.
 * Targets (issue 5): ≥ 50% of the bare loop's rate, p50 < 20 ms.
 *
 * Knobs (environment): BENCH_WEBHOOK_WORKERS worker processes (default 1); BENCH_STEADY_EVENTS
 * events/s of the latency phase (default half the measured rate); BENCH_NODE_OPTIONS passed
 * to the service's processes as NODE_OPTIONS (e.g. `--import` of a profiler).
 */
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { createLogger } from '../src/logger.js';
import { createQueues, closeQueues, JOBS, queueFor } from '../src/queues.js';
import { createRedis } from '../src/redis.js';
import { startReceivers, type Receipt } from './support/receivers.js';
import { cpuSeconds, percentile, ratio, round, spawnService, startStack, target, until, type Bench } from './lib.js';

const SUBSCRIPTIONS = 10;
const CONCURRENCY = 200;
const CONNECTIONS_PER_ORIGIN = 32;
/** Offered load of the throughput phase: more than the machine delivers, so the rate is capacity. */
const SATURATE_EVENTS_PER_S = 800;

const payload = (i: number) => ({ i, order_id: `ord-${i}`, amount: i % 1000, note: 'a small realistic payload' });

const bench: Bench = {
  description:
    'webhook deliveries (ledger commit → fan-out → signed POST to 10 loopback receivers) vs a bare undici loop sending the same signed POSTs',
  async run({ options, log }) {
    const durationS = options.durationS ?? 10;
    const workerProcesses = Number(process.env.BENCH_WEBHOOK_WORKERS ?? 1);
    const receivers = await startReceivers(SUBSCRIPTIONS);
    const notes: string[] = [];
    const loadBefore = loadavg()[0];
    let throughput: number | null = null;
    let delivered = 0;
    let breakdown = '';
    let committedPerS: number | null = null;
    let latency: { p50: number | null; p99: number | null; rate: number; n: number } | undefined;
    let cpu: { workerUs: number; pgUs: number; n: number; throughputWorkerUs: number } | undefined;
    try {
      const stack = await startStack({
        workerQueues: 'ledger,webhook',
        workerProcesses,
        env: {
          WEBHOOK_CONCURRENCY: String(CONCURRENCY),
          ...(process.env.BENCH_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_NODE_OPTIONS } : {}),
        },
      });
      const queueRedis = createRedis(stack.env.REDIS_URL, 'blocking');
      const queues = createQueues(queueRedis, { REDIS_PREFIX: stack.env.REDIS_PREFIX, QUEUE_SHARDS: 1 }, createLogger('silent'));
      try {
        const app = await stack.createApp(['admin', 'events:write']);
        for (const url of receivers.urls) {
          const r = await fetch(`${stack.base}/v1/webhook-subscriptions`, {
            method: 'POST',
            headers: { ...app.headers, 'content-type': 'application/json' },
            body: JSON.stringify({ name: 'bench', target_url: url, event_patterns: ['bench.*'] }),
          });
          if (r.status !== 201) throw new Error(`subscription: ${r.status} ${await r.text()}`);
        }
        let seq = 0;
        /** Offers `perS` events per second for `seconds`, in 10 ms ticks, straight onto the ledger queue. */
        const offer = async (perS: number, seconds: number) => {
          const ticks = seconds * 100;
          const start = Date.now();
          let sent = 0;
          for (let t = 1; t <= ticks; t++) {
            const due = Math.round((perS * t) / 100);
            const jobs = [];
            for (; sent < due; sent++) {
              const event = {
                id: randomUUID(),
                app_id: app.appId,
                event_type: 'bench.webhook',
                payload: payload(seq++),
                edges: [],
                attachments: [],
              };
              jobs.push({ name: 'ledger', data: { event }, opts: { jobId: JOBS.ledger.jobId({ event }) } });
            }
            if (jobs.length) await queueFor(queues, 'ledger').addBulk(jobs);
            const wait = start + t * 10 - Date.now();
            if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          }
          return sent;
        };
        const drain = (expected: number) => until(async () => receivers.receipts.length >= expected, 120_000, 50);
        // CPU the service spends per delivery: the worker processes, and the PostgreSQL backends
        // serving this bench's database (the rest of the machine's load does not count).
        const workerCpu = () => stack.workers.reduce((t, w) => t + cpuSeconds(w.proc.pid!), 0);
        const pgBackends = new Set<number>();
        const pgCpu = async () => {
          const rows = await stack.sql<
            { pid: number }[]
          >`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`;
          for (const r of rows) pgBackends.add(r.pid);
          return [...pgBackends].reduce((t, pid) => t + cpuSeconds(pid), 0);
        };

        log('warm-up');
        await offer(50, 2);
        await drain(seq * SUBSCRIPTIONS);

        log(`throughput: ${SATURATE_EVENTS_PER_S} events/s × ${SUBSCRIPTIONS} subscriptions offered for ${durationS} s`);
        const before = receivers.receipts.length;
        const [worker0, pg0] = [workerCpu(), await pgCpu()];
        const offeredEvents = await offer(SATURATE_EVENTS_PER_S, durationS);
        const drained = await drain(seq * SUBSCRIPTIONS);
        const phaseReceipts = receivers.receipts.slice(before);
        const throughputWorkerUs = ((workerCpu() - worker0) * 1e6) / Math.max(1, phaseReceipts.length);
        const phase = phaseReceipts.map((r) => r.at).sort((a, b) => a - b);
        // How fast the ledger committed the events meanwhile (by their created_at), middle 80%.
        const created = [...new Map(phaseReceipts.map((r) => [r.eventId, r.createdAt])).values()].sort((x, y) => x - y);
        const c0 = Math.floor(created.length * 0.1);
        const c1 = Math.floor(created.length * 0.9) - 1;
        committedPerS = c1 > c0 && created[c1] > created[c0] ? round(((c1 - c0) * 1000) / (created[c1] - created[c0]), 1) : null;
        delivered = phase.length;
        if (!drained) notes.push(`throughput phase did not drain within 120 s (${delivered} of ${offeredEvents * SUBSCRIPTIONS})`);
        // The middle 80% of arrivals: no ramp-up, no tail.
        const lo = Math.floor(phase.length * 0.1);
        const hi = Math.floor(phase.length * 0.9) - 1;
        throughput = hi > lo ? round(((hi - lo) * 1000) / (phase[hi] - phase[lo]), 1) : null;
        log(`  ${delivered} deliveries, ${throughput} /s sustained; ledger committed ~${committedPerS} events/s meanwhile`);

        const steadyEvents =
          Number(process.env.BENCH_STEADY_EVENTS ?? 0) || Math.max(10, Math.floor(((throughput ?? 1000) * 0.5) / SUBSCRIPTIONS));
        log(`latency: ${steadyEvents} events/s (half the sustained delivery rate) for ${durationS} s`);
        const mark = receivers.receipts.length;
        await offer(steadyEvents, durationS);
        await drain(seq * SUBSCRIPTIONS);
        const steady = receivers.receipts.slice(mark);
        // Both phases: the delayed safety-net jobs of the first phase's events run during the second.
        const n = receivers.receipts.length - before;
        cpu = { workerUs: ((workerCpu() - worker0) * 1e6) / n, pgUs: (((await pgCpu()) - pg0) * 1e6) / n, n, throughputWorkerUs };
        log(
          `  CPU per delivery: worker ${cpu.workerUs.toFixed(0)} µs (throughput phase alone ${throughputWorkerUs.toFixed(0)} µs), PostgreSQL ${cpu.pgUs.toFixed(0)} µs`,
        );
        const lat = steady.map((r: Receipt) => r.at - r.createdAt).sort((a, b) => a - b);
        const toBuilt = steady.map((r) => r.builtAt - r.createdAt).sort((a, b) => a - b);
        const toReceipt = steady.map((r) => r.at - r.builtAt).sort((a, b) => a - b);
        latency = { p50: round(percentile(lat, 50)), p99: round(percentile(lat, 99)), rate: steadyEvents * SUBSCRIPTIONS, n: lat.length };
        log(`  p50 ${latency.p50} ms, p99 ${latency.p99} ms over ${lat.length} deliveries`);
        breakdown = `latency split at p50: commit → delivery built ${percentile(toBuilt, 50)} ms, built → received ${percentile(toReceipt, 50)} ms (p99 ${percentile(toBuilt, 99)} / ${percentile(toReceipt, 99)} ms)`;
        log(`  ${breakdown}`);
      } finally {
        await closeQueues(queues);
        queueRedis.disconnect();
        await stack.stop();
      }

      log(`floor: ${delivered} signed POSTs from a bare undici loop, concurrency ${CONCURRENCY}`);
      const bare = spawnService('bench/support/bare-webhook-loop.ts', {
        BARE_TARGETS: receivers.urls.map((u) => u.replace(/\/hook$/, '/bare')).join(','),
        BARE_COUNT: String(delivered),
        BARE_CONCURRENCY: String(CONCURRENCY),
        BARE_CONNECTIONS: String(CONNECTIONS_PER_ORIGIN),
      });
      await bare.waitFor(/bare done/, 300_000);
      const [, ok, ms, bareCpuMs] = /bare done (\d+) ([\d.]+) ([\d.]+)/.exec(bare.output())!;
      await bare.exited;
      const bareRate = round((Number(ok) * 1000) / Number(ms), 1);
      const bareCpuUs = round((Number(bareCpuMs) * 1000) / Number(ok), 1);

      const figures = {
        deliveries_per_s: throughput,
        events_committed_per_s_meanwhile: committedPerS,
        commit_to_receipt_p50_ms: latency?.p50 ?? null,
        commit_to_receipt_p99_ms: latency?.p99 ?? null,
        worker_cpu_us_per_delivery: round(cpu?.workerUs, 1),
        postgres_cpu_us_per_delivery: round(cpu?.pgUs, 1),
      };
      const baselines = { bare_signed_posts_per_s: bareRate, bare_cpu_us_per_post: bareCpuUs };
      const ratios = {
        deliveries_per_s_vs_bare_signed_posts_per_s: ratio(throughput, bareRate),
        worker_cpu_us_per_delivery_vs_bare_cpu_us_per_post: ratio(figures.worker_cpu_us_per_delivery, bareCpuUs),
      };
      notes.push(
        `${SUBSCRIPTIONS} subscriptions matching every event, receivers on loopback in the bench process answering 200`,
        `${workerProcesses} worker process(es) serving ledger+webhook, WEBHOOK_CONCURRENCY=${CONCURRENCY}, ${CONNECTIONS_PER_ORIGIN} keep-alive sockets per receiver; the bare loop uses the same`,
        `throughput: ${SATURATE_EVENTS_PER_S} events/s offered for ${durationS} s (${delivered} deliveries), rate over the middle 80% of arrivals`,
        ...(breakdown ? [breakdown] : []),
        ...(cpu
          ? [
              `CPU per delivery over both phases (${cpu.n} deliveries): user+system time of the worker process(es) and of the PostgreSQL backends of the bench database, from /proc; the worker's alone in the throughput phase ${cpu.throughputWorkerUs.toFixed(0)} µs; Redis and the receivers not counted; the bare loop's is its own process's`,
            ]
          : []),
        `machine load average (1 min) ${loadBefore.toFixed(1)} at the start, ${loadavg()[0].toFixed(1)} at the end: other work on the machine moves every figure`,
        latency
          ? `latency: ${latency.rate} deliveries/s offered (half the sustained rate) for ${durationS} s, ${latency.n} deliveries; commit time = the event's created_at`
          : 'latency not measured',
      );
      return {
        figures,
        baselines,
        ratios,
        targets: {
          deliveries_per_s_vs_bare_signed_posts_per_s: target(ratios.deliveries_per_s_vs_bare_signed_posts_per_s, '>=', 0.5),
          commit_to_receipt_p50_ms: target(figures.commit_to_receipt_p50_ms, '<', 20),
        },
        notes,
      };
    } finally {
      await receivers.stop();
    }
  },
};
export default bench;

/**
 * Ingest: N clients POST /v1/events to a web process backed by a separate ledger worker
 * process, against (a) a bare express handler answering 201 under the same load — the HTTP
 * ceiling — and (b) the same rows written straight to Postgres with multi-row INSERTs — the
 * storage ceiling. Targets (issue 3): committed/s ≥ 50% of (a), p99 < 50 ms at 32 clients.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { createApplication } from '../src/apps/applications.js';
import { cpus, loadavg } from 'node:os';
import {
  machineBusySeconds,
  processUsage,
  ratio,
  round,
  runLoad,
  startEchoServer,
  startStack,
  target,
  type Bench,
  type LoadRequest,
} from './lib.js';

const INSERT_WRITERS = 4;
const INSERT_BATCH = 100;

const eventBody = (i: number) =>
  JSON.stringify({ event_type: 'bench.ingest', payload: { i, order_id: `ord-${i}`, amount: i % 1000, note: 'a small realistic payload' } });

const bench: Bench = {
  description: 'POST /v1/events (web + ledger worker processes) vs a bare express 201 and raw multi-row INSERTs',
  async run({ options, log }) {
    const clients = options.clients ?? 32;
    const durationS = options.durationS ?? 20;
    const json = { 'content-type': 'application/json' };

    const loadAtStart = loadavg()[0];
    const cores = cpus().length;
    const warmupS = 2;
    log(`baseline (a): bare express handler, ${clients} clients, ${durationS} s`);
    const echo = await startEchoServer(201);
    // CPU of each process, and of the whole machine (last), over exactly the measured window of a load.
    const cpuOver = (pids: number[]) => {
      const read = () => [...pids.map((pid) => processUsage(pid).cpuS), machineBusySeconds()];
      let start: number[] = [];
      let end: number[] = [];
      const marks = Promise.all([
        new Promise<void>((r) => setTimeout(() => r(void (start = read())), warmupS * 1000)),
        new Promise<void>((r) => setTimeout(() => r(void (end = read())), (warmupS + durationS) * 1000)),
      ]);
      return marks.then(() => end.map((e, i) => e - start[i]));
    };
    const echoCpu = cpuOver([echo.pid]);
    const http = await runLoad(echo.base, {
      clients,
      durationS,
      warmupS,
      request: (i): LoadRequest => ({ method: 'POST', path: '/v1/events', headers: json, body: eventBody(i) }),
    }).finally(() => echoCpu.finally(() => echo.stop()));
    const [echoCpuS, echoMachineS] = await echoCpu;

    log(`gateway: 1 web + 1 worker process (ledger), ${clients} clients, ${durationS} s`);
    const stack = await startStack({ workerQueues: 'ledger' });
    try {
      /** One measured load of POST /v1/events against a stack: its answers, commits and CPU. */
      const measure = async (target: typeof stack) => {
        const app = await target.createApp(['events:write']);
        const count = async () =>
          (await target.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE app_id = ${app.appId}`)[0].n;
        // Committed rows are counted over exactly the measured window of the load.
        let atStart = 0;
        let atEnd = 0;
        const cpu = cpuOver([target.web[0].proc.pid!, target.workers[0].proc.pid!]);
        const marks = [
          new Promise<void>((r) =>
            setTimeout(async () => {
              atStart = await count();
              r();
            }, warmupS * 1000),
          ),
          new Promise<void>((r) =>
            setTimeout(
              async () => {
                atEnd = await count();
                r();
              },
              (warmupS + durationS) * 1000,
            ),
          ),
        ];
        const load = await runLoad(target.base, {
          clients,
          durationS,
          warmupS,
          request: (i) => ({ method: 'POST', path: '/v1/events', headers: { ...json, ...app.headers }, body: eventBody(i) }),
        });
        await Promise.all(marks);
        const [webCpuS, workerCpuS, machineS] = await cpu;
        const committed = atEnd - atStart;
        return { load, committed, committedPerS: round(committed / durationS, 1), webCpuS, workerCpuS, machineS };
      };
      const { load, committed, committedPerS, webCpuS, workerCpuS, machineS } = await measure(stack);
      const cpuMsPer = (cpuS: number, n: number) => (n > 0 ? round((cpuS * 1000) / n, 3) : null);

      // Tracing on: the same load with every span exported over OTLP to a local sink.
      log(`gateway with tracing on (OTLP to a local sink), ${clients} clients, ${durationS} s`);
      const sink = await startOtlpSink();
      const tracedStack = await startStack({ workerQueues: 'ledger', env: { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url } });
      const traced = await measure(tracedStack).finally(() => tracedStack.stop().finally(() => sink.close()));

      log(`baseline (b): ${INSERT_WRITERS} writers, multi-row INSERTs of ${INSERT_BATCH}, ${durationS} s`);
      const insertPerS = await rawInsertRate(stack, durationS);

      const figures = {
        accepted_per_s: load.okPerS,
        committed_per_s: committedPerS,
        post_p50_ms: load.p50Ms,
        post_p90_ms: load.p90Ms,
        post_p99_ms: load.p99Ms,
        post_max_ms: load.maxMs,
        post_errors: load.errors,
        web_cpu_ms_per_event: cpuMsPer(webCpuS, committed),
        worker_cpu_ms_per_event: cpuMsPer(workerCpuS, committed),
        machine_cpu_ms_per_event: cpuMsPer(machineS, committed),
        // The rate the machine's cores could sustain at that cost, if nothing else limited it.
        machine_cpu_bound_per_s: machineS > 0 ? round((cores * committed) / machineS, 0) : null,
        traced_committed_per_s: traced.committedPerS,
        traced_post_p50_ms: traced.load.p50Ms,
        traced_post_p99_ms: traced.load.p99Ms,
        traced_web_cpu_ms_per_event: cpuMsPer(traced.webCpuS, traced.committed),
        traced_worker_cpu_ms_per_event: cpuMsPer(traced.workerCpuS, traced.committed),
        traced_machine_cpu_ms_per_event: cpuMsPer(traced.machineS, traced.committed),
        traced_export_requests: sink.requests(),
        traced_export_kb: round(sink.bytes() / 1024, 0),
      };
      const baselines = {
        http_201_per_s: http.okPerS,
        http_p50_ms: http.p50Ms,
        http_p99_ms: http.p99Ms,
        http_cpu_ms_per_request: cpuMsPer(echoCpuS, http.requests),
        http_machine_cpu_ms_per_request: cpuMsPer(echoMachineS, http.requests),
        http_machine_cpu_bound_per_s: echoMachineS > 0 ? round((cores * http.requests) / echoMachineS, 0) : null,
        insert_rows_per_s: insertPerS,
      };
      const ratios = {
        committed_per_s_vs_http_201_per_s: ratio(committedPerS, http.okPerS),
        committed_per_s_vs_insert_rows_per_s: ratio(committedPerS, insertPerS),
        web_cpu_ms_per_event_vs_http_cpu_ms_per_request: ratio(cpuMsPer(webCpuS, committed), cpuMsPer(echoCpuS, http.requests)),
        machine_cpu_ms_per_event_vs_http_machine_cpu_ms_per_request: ratio(
          cpuMsPer(machineS, committed),
          cpuMsPer(echoMachineS, http.requests),
        ),
        traced_committed_per_s_vs_committed_per_s: ratio(traced.committedPerS, committedPerS),
        traced_machine_cpu_ms_per_event_vs_machine_cpu_ms_per_event: ratio(
          cpuMsPer(traced.machineS, traced.committed),
          cpuMsPer(machineS, committed),
        ),
      };
      return {
        figures,
        baselines,
        ratios,
        targets: {
          committed_per_s_vs_http_201_per_s: target(ratios.committed_per_s_vs_http_201_per_s, '>=', 0.5),
          post_p99_ms: target(load.p99Ms, '<', 50),
        },
        notes: [
          `${clients} closed-loop clients, ${durationS} s measured after 2 s warm-up; web and worker are separate Node processes (NODE_ENV=production, LOG_LEVEL=info), load generator in the bench process`,
          `POST answers 201 after the ledger commit; statuses seen: ${JSON.stringify(load.statuses)}`,
          `baseline (a) statuses: ${JSON.stringify(http.statuses)}`,
          `baseline (b): ${INSERT_WRITERS} concurrent connections, INSERT … VALUES of ${INSERT_BATCH} event rows per statement (autocommit), same table and payload shape`,
          `CPU per event: user + system time of the web and the worker process (from /proc) over the measured window, divided by the events committed in it; the bare handler's per request likewise. On a shared machine these move far less than the rates do`,
          `machine CPU per event: busy time of all ${cores} cores (/proc/stat: every process — web, worker, PostgreSQL, Redis, the load generator — and the kernel) over the measured window / events committed; the baseline likewise per bare request. machine_cpu_bound_per_s = cores ÷ that cost: the most the machine could commit at this cost per event, whatever the concurrency. Their ratio bounds the committed/s ratio from above when the cores are the limit`,
          `tracing on (traced_*): a second stack, the same load, OTEL_EXPORTER_OTLP_ENDPOINT set to an HTTP sink in the bench process that answers every export (all spans sampled, batch processor defaults); the figures without the traced_ prefix are tracing off, where no OpenTelemetry module is loaded`,
          `the machine was shared with other work: load average (1 min) ${round(loadAtStart, 1)} at the start and ${round(loadavg()[0], 1)} at the end of the run (2 CPUs); rates and latencies swing with it between runs`,
        ],
      };
    } finally {
      await stack.stop();
    }
  },
};

/** An OTLP/HTTP receiver that reads and counts what it is sent, answering as a collector does. */
async function startOtlpSink(): Promise<{ url: string; requests(): number; bytes(): number; close(): Promise<void> }> {
  let requests = 0;
  let bytes = 0;
  const server = createServer((req, res) => {
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => {
      requests++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    requests: () => requests,
    bytes: () => bytes,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

/** Rows/s of plain multi-row INSERTs into `events` — what Postgres alone can take on this machine. */
async function rawInsertRate(stack: { sql: import('../src/db.js').Sql }, durationS: number): Promise<number | null> {
  const app = await createApplication(stack.sql, 'bench-raw-insert', ['events:write']);
  let seq = 0;
  let rows = 0;
  const end = performance.now() + durationS * 1000;
  const writer = async () => {
    while (performance.now() < end) {
      const batch = Array.from({ length: INSERT_BATCH }, () => {
        const i = ++seq;
        return {
          id: randomUUID(),
          app_id: app.appId,
          seq: i,
          created_at: new Date(),
          event_type: 'bench.ingest',
          payload: stack.sql.json(JSON.parse(eventBody(i)).payload),
        };
      });
      await stack.sql`INSERT INTO events ${stack.sql(batch)}`;
      if (performance.now() <= end) rows += batch.length;
    }
  };
  await Promise.all(Array.from({ length: INSERT_WRITERS }, writer));
  return round(rows / durationS, 1);
}

export default bench;

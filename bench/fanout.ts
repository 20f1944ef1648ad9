/**
 * Fan-out: 1,000 (and then 5,000) concurrent SSE clients of one application on one web
 * process, events committed at a steady 50/s. Measured: commit → receipt latency at every
 * client (p50, p99, max), misses / duplicates / reordering, and the web process's RSS and CPU
 * (idle with every stream open, and under the event load). Floor, same run: a bare Redis
 * publish → subscriber round trip at the same rate. Targets (issue 4): p99 < 100 ms at 1,000
 * clients, no client misses or duplicates an event, RSS < 300 MB at 5,000 idle connections.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createApplication } from '../src/apps/applications.js';
import { createSql } from '../src/db.js';
import { publishWakes, wakeChannels } from '../src/ledger/wake.js';
import { writeEvents } from '../src/ledger/write.js';
import { projectRoot } from '../src/project-root.js';
import { createRedis } from '../src/redis.js';
import { SHARED_REDIS_URL } from '../test/helpers/servers.js';
import {
  benchEnv,
  benchNodeArgs,
  createBenchDatabase,
  deleteRedisPrefix,
  freePort,
  percentile,
  processUsage,
  round,
  spawnService,
  target,
  type Bench,
  type ChildService,
} from './lib.js';

const RATE = 50;
const CLIENT_PROCESSES = 2;

interface ClientResult {
  connected: number;
  failed: number;
  received: number;
  missing: number;
  duplicates: number;
  gaps: number;
  reordered: number;
  samples: number;
  cpu_pct: number;
  max_ms: number;
  bucket_ms: number;
  hist: [number, number][];
}

/** Percentile of merged histograms, in ms (bucket upper bound). */
function histPercentile(results: ClientResult[], p: number): number | null {
  const merged = new Map<number, number>();
  let total = 0;
  for (const r of results)
    for (const [b, c] of r.hist) {
      merged.set(b, (merged.get(b) ?? 0) + c);
      total += c;
    }
  if (total === 0) return null;
  const rank = Math.ceil((p / 100) * total);
  let seen = 0;
  for (const b of [...merged.keys()].sort((x, y) => x - y)) {
    seen += merged.get(b)!;
    if (seen >= rank) return round((b + 1) * results[0].bucket_ms);
  }
  return null;
}

interface RunFigures {
  clients: number;
  connected: number;
  p50: number | null;
  p99: number | null;
  max: number | null;
  missing: number;
  duplicates: number;
  reordered: number;
  idleRssMb: number;
  loadRssMb: number;
  loadCpuPct: number | null;
  clientCpuPct: number[];
  events: number;
}

/**
 * The web process as production runs it (Procfile: `node dist/src/web.js`), not under the
 * tsx loader the other benches use: its memory is part of what is measured.
 */
async function startWeb(env: Record<string, string>): Promise<{ proc: ChildProcess; base: string; stop(): Promise<void> }> {
  const port = await freePort();
  const proc = spawn(process.execPath, [...benchNodeArgs(), join(projectRoot(), 'dist/src/web.js')], {
    cwd: projectRoot(),
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (out += d));
  const exited = new Promise((r) => proc.once('exit', r));
  const deadline = Date.now() + 60_000;
  while (!/web listening/.test(out)) {
    if (Date.now() > deadline || proc.exitCode !== null) throw new Error(`web did not start:\n${out.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    proc,
    base: `http://127.0.0.1:${port}`,
    async stop() {
      proc.kill('SIGTERM');
      const t = setTimeout(() => proc.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(t);
    },
  };
}

async function runOnce(clients: number, durationS: number, log: (m: string) => void): Promise<RunFigures> {
  const db = await createBenchDatabase();
  const env = benchEnv(db.url, { STREAM_MAX_PER_APP: String(clients + 100) });
  const sql = createSql(db.url, { max: 4 });
  const redis = createRedis(env.REDIS_URL, 'blocking');
  const web = await startWeb(env);
  const stack = { sql, env, base: web.base };
  const procs: ChildService[] = [];
  try {
    const created = await createApplication(sql, 'bench-fanout', ['events:read']);
    const app = { appId: created.appId, apiKey: created.apiKey };
    const pid = web.proc.pid!;
    const events = RATE * durationS;
    log(`${clients} clients in ${CLIENT_PROCESSES} processes`);
    for (let i = 0; i < CLIENT_PROCESSES; i++) {
      procs.push(
        spawnService('bench/support/sse-clients.ts', {
          CLIENTS_URL: `${stack.base}/events/stream`,
          CLIENTS_N: String(Math.ceil(clients / CLIENT_PROCESSES)),
          CLIENTS_EXPECT: String(events),
          CLIENTS_TIMEOUT_MS: String((durationS + 30) * 1000),
          CLIENTS_HEADERS: JSON.stringify({ Authorization: `Bearer ${app.apiKey}` }),
        }),
      );
    }
    await Promise.all(procs.map((p) => p.waitFor(/clients connected/, 120_000)));
    const connected = procs.reduce((n, p) => n + Number(/clients connected (\d+)/.exec(p.output())![1]), 0);
    // Let the process settle with every stream open and idle.
    await new Promise((r) => setTimeout(r, 3000));
    const idle = processUsage(pid);
    log(`  ${connected} connected; idle RSS ${idle.rssMb} MB`);

    log(`  committing ${RATE} events/s for ${durationS} s`);
    const cpu0 = processUsage(pid).cpuS;
    const t0 = performance.now();
    let peakRss = idle.rssMb;
    for (let i = 0; i < events; i++) {
      const due = t0 + (i * 1000) / RATE;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      // The ledger worker's commit step: one group commit, then the wake.
      const committed = await writeEvents(stack.sql, [
        {
          id: randomUUID(),
          app_id: app.appId,
          event_type: 'bench.fanout',
          payload: { i, note: 'a small realistic payload' },
          edges: [],
          attachments: [],
        },
      ]);
      await publishWakes(redis, wakeChannels({ REDIS_PREFIX: stack.env.REDIS_PREFIX, REDIS_SHARDED_PUBSUB: false }), committed);
      if (i % RATE === 0) peakRss = Math.max(peakRss, processUsage(pid).rssMb);
    }
    const elapsedS = (performance.now() - t0) / 1000;
    const cpuPct = round(((processUsage(pid).cpuS - cpu0) / elapsedS) * 100, 1);
    await Promise.all(procs.map((p) => p.waitFor(/clients done .*\n/, (durationS + 60) * 1000)));
    const results = procs.map((p) => JSON.parse(/clients done (.*)\n/.exec(p.output())![1]) as ClientResult);
    const sum = (f: (r: ClientResult) => number) => results.reduce((s, r) => s + f(r), 0);
    const figures: RunFigures = {
      clients,
      connected,
      p50: histPercentile(results, 50),
      p99: histPercentile(results, 99),
      max: round(Math.max(...results.map((r) => r.max_ms))),
      missing: sum((r) => r.missing) + sum((r) => r.failed) * events,
      duplicates: sum((r) => r.duplicates),
      reordered: sum((r) => r.reordered),
      idleRssMb: idle.rssMb,
      loadRssMb: peakRss,
      loadCpuPct: cpuPct,
      clientCpuPct: results.map((r) => r.cpu_pct),
      events,
    };
    log(
      `  p50 ${figures.p50} ms, p99 ${figures.p99} ms, max ${figures.max} ms; missing ${figures.missing}, duplicates ${figures.duplicates}, reordered ${figures.reordered}; RSS ${peakRss} MB, CPU ${cpuPct}%; client processes CPU ${figures.clientCpuPct.join('% / ')}%`,
    );
    return figures;
  } finally {
    for (const p of procs) p.kill('SIGKILL');
    redis.disconnect();
    await web.stop();
    await sql.end({ timeout: 5 });
    await deleteRedisPrefix(env.REDIS_URL, env.REDIS_PREFIX);
    await db.drop();
  }
}

/** The floor: publish → subscriber latency of bare Redis pub/sub at the same rate. */
async function redisFloor(durationS: number): Promise<{ p50: number | null; p99: number | null; max: number | null }> {
  const pub = createRedis(SHARED_REDIS_URL, 'blocking');
  const sub = createRedis(SHARED_REDIS_URL, 'blocking');
  const channel = `bench-floor-${randomUUID()}`;
  const lat: number[] = [];
  sub.on('message', (_c: string, msg: string) => lat.push(performance.now() - Number(msg)));
  await sub.subscribe(channel);
  const n = RATE * durationS;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const wait = t0 + (i * 1000) / RATE - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    await pub.publish(channel, String(performance.now()));
  }
  await new Promise((r) => setTimeout(r, 200));
  pub.disconnect();
  sub.disconnect();
  lat.sort((a, b) => a - b);
  return { p50: round(percentile(lat, 50), 3), p99: round(percentile(lat, 99), 3), max: round(lat.at(-1), 3) };
}

const bench: Bench = {
  description:
    'SSE fan-out: 1,000 and 5,000 clients of one application, 50 events/s committed → received at every client, vs a bare Redis publish → subscriber round trip',
  async run({ options, log }) {
    const durationS = options.durationS ?? 20;
    log('building the production web process (tsc -p tsconfig.build.json)');
    execFileSync(process.execPath, [join(projectRoot(), 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], {
      cwd: projectRoot(),
      stdio: 'inherit',
    });
    const loadBefore = loadavg()[0];
    const small = options.clients ?? 1000;
    const large = Number(process.env.BENCH_FANOUT_LARGE ?? 5000);
    log(`floor: bare Redis publish → subscriber at ${RATE}/s for ${durationS} s`);
    const floor = await redisFloor(durationS);
    log(`  p50 ${floor.p50} ms, p99 ${floor.p99} ms`);
    const a = await runOnce(small, durationS, log);
    const b = await runOnce(large, durationS, log);
    const k = (r: RunFigures) => `${r.clients}`;
    const figures: Record<string, number | null> = {};
    for (const r of [a, b]) {
      figures[`c${k(r)}_commit_to_receipt_p50_ms`] = r.p50;
      figures[`c${k(r)}_commit_to_receipt_p99_ms`] = r.p99;
      figures[`c${k(r)}_commit_to_receipt_max_ms`] = r.max;
      figures[`c${k(r)}_missed_events`] = r.missing;
      figures[`c${k(r)}_duplicate_events`] = r.duplicates + r.reordered;
      figures[`c${k(r)}_idle_rss_mb`] = r.idleRssMb;
      figures[`c${k(r)}_load_rss_mb`] = r.loadRssMb;
      figures[`c${k(r)}_load_cpu_pct`] = r.loadCpuPct;
    }
    const baselines = { redis_pubsub_p50_ms: floor.p50, redis_pubsub_p99_ms: floor.p99, redis_pubsub_max_ms: floor.max };
    const ratios = {
      [`c${small}_commit_to_receipt_p50_ms_vs_redis_pubsub_p50_ms`]: a.p50 !== null && floor.p50 ? round(a.p50 / floor.p50, 1) : null,
    };
    return {
      figures,
      baselines,
      ratios,
      targets: {
        [`c${small}_commit_to_receipt_p99_ms`]: target(a.p99, '<', 100),
        [`c${small}_missed_events`]: target(a.missing, '<=', 0),
        [`c${small}_duplicate_events`]: target(a.duplicates + a.reordered, '<=', 0),
        [`c${large}_missed_events`]: target(b.missing, '<=', 0),
        [`c${large}_duplicate_events`]: target(b.duplicates + b.reordered, '<=', 0),
        [`c${large}_idle_rss_mb`]: target(b.idleRssMb, '<', 300),
      },
      notes: [
        `one web process; ${RATE} events/s for ${durationS} s (${a.events} events), each committed the way the ledger worker does (writeEvents + publishWakes) by the bench process`,
        `clients: plain HTTP/1.1 SSE connections without filters, in ${CLIENT_PROCESSES} client processes on the same machine (their parsing competes for the same CPUs)`,
        `latency = receipt time at the client − the event's created_at (assigned inside the commit transaction, so it includes the commit itself); 0.1 ms histogram buckets`,
        `missed = events a client did not receive (a refused connection counts all of them); duplicates include reordered arrivals; every client checks positions from the cursors`,
        `RSS and CPU of the web process from /proc: idle = all streams open, no events, after 3 s; load = peak RSS and mean CPU (% of one core) while events flow`,
        `${a.connected} and ${b.connected} streams connected; client processes used ${a.clientCpuPct.join('% / ')}% and ${b.clientCpuPct.join('% / ')}% of a core`,
        `web process: the production build (node dist/src/web.js, as in the Procfile)`,
        `machine load average (1 min) ${round(loadBefore, 1)} at the start, ${round(loadavg()[0], 1)} at the end: other work on the machine inflates latencies, the floor shows by how much`,
      ],
    };
  },
};
export default bench;

/**
 * Shared pieces of the benchmarks (`npm run bench -- <name>`): the module shape every
 * bench/<name>.ts exports, a stack started as child processes on a fresh database, a
 * closed-loop HTTP load generator, percentiles, and the result file + README table.
 *
 * Every figure is reported beside a baseline measured in the same run on the same machine
 * (a bare HTTP handler, a raw INSERT…), so the ratios mean something whatever the machine.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync, existsSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import postgres from 'postgres';
import { Pool } from 'undici';
import { createApplication } from '../src/apps/applications.js';
import { SCOPES, type Scope } from '../src/auth/scopes.js';
import { createSql, type Sql } from '../src/db.js';
import { migrate } from '../src/migrate.js';
import { projectRoot } from '../src/project-root.js';
import { parseConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { closeQueues, createQueues, type Queues } from '../src/queues.js';
import { createRedis } from '../src/redis.js';
import { freePort, spawnService, type ChildService } from '../test/helpers/stack.js';
import { pgDatabaseUrl, SHARED_REDIS_URL } from '../test/helpers/servers.js';

export { freePort, spawnService, type ChildService };

// ---------------------------------------------------------------- the module shape

export interface BenchOptions {
  /** Measured seconds per phase (each bench has its own default). */
  durationS?: number;
  /** Concurrent clients (each bench has its own default). */
  clients?: number;
}

export interface BenchContext {
  options: BenchOptions;
  log(message: string): void;
}

export interface Target {
  /** Human-readable goal, e.g. ">= 0.5" or "< 50". */
  want: string;
  got: number | null;
  met: boolean;
}

/** What a bench measures; run.ts adds name, date, commit and machine and writes the JSON. */
export interface BenchReport {
  /** The system under test. Keys carry their unit: `committed_per_s`, `post_p99_ms`. */
  figures: Record<string, number | null>;
  /** The same-run reference operations the figures are compared with. */
  baselines: Record<string, number | null>;
  /** figure / baseline, named `<figure>_vs_<baseline>`. */
  ratios: Record<string, number | null>;
  targets: Record<string, Target>;
  /** Parameters of the run (clients, duration, batch sizes) and anything that could not be measured. */
  notes?: string[];
}

/** Default export of every bench/<name>.ts. */
export interface Bench {
  /** One line: what is measured against what. */
  description: string;
  run(ctx: BenchContext): Promise<BenchReport>;
}

export interface BenchResult extends BenchReport {
  name: string;
  date: string;
  commit: string;
  machine: Machine;
  /** When the `npm run bench` invocation that produced this result started (one value per invocation). */
  run_started?: string;
}

export interface Machine {
  cpus: number;
  memory_gb: number;
  cpu_model?: string;
  /** 1-minute load average when the bench started and ended: other work on the machine moves every figure. */
  load_1m_start?: number;
  load_1m_end?: number;
}

// ---------------------------------------------------------------- numbers

/** The p-th percentile (0–100) of already sorted numbers, nearest-rank. */
export function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export const round = (n: number | null | undefined, digits = 2): number | null =>
  n === null || n === undefined || !Number.isFinite(n) ? null : Math.round(n * 10 ** digits) / 10 ** digits;

export const ratio = (a: number | null, b: number | null): number | null => (a === null || b === null || b === 0 ? null : round(a / b, 3));

/** A target met when `got <op> want`; null (not measured) never meets it. */
export function target(got: number | null, op: '>=' | '<=' | '<' | '>', want: number): Target {
  const met = got !== null && (op === '>=' ? got >= want : op === '<=' ? got <= want : op === '<' ? got < want : got > want);
  return { want: `${op} ${want}`, got, met };
}

// ---------------------------------------------------------------- load

export interface LoadRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface LoadResult {
  /** Responses received in the measured window (any status). */
  requests: number;
  /** Responses with a 2xx status. */
  ok: number;
  /** Connection errors and non-2xx responses. */
  errors: number;
  statuses: Record<string, number>;
  seconds: number;
  okPerS: number;
  p50Ms: number | null;
  p90Ms: number | null;
  p99Ms: number | null;
  maxMs: number | null;
}

/**
 * Closed-loop load: `clients` connections each send the next request as soon as the previous
 * answered, for `warmupS` unmeasured then `durationS` measured seconds. Latency is per
 * request, client side, including the body read. `request(i, client)` builds the i-th
 * request; `client` (0…clients−1) lets a bench give each client its own application.
 */
export async function runLoad(
  origin: string | string[],
  o: { clients: number; durationS: number; warmupS?: number; request: (i: number, client: number) => LoadRequest },
): Promise<LoadResult> {
  // Several origins (one per web process) share the clients round-robin, as a load balancer would.
  const origins = typeof origin === 'string' ? [origin] : origin;
  const pools = origins.map((_, k) => new Pool(origins[k], { connections: Math.ceil(o.clients / origins.length), pipelining: 1 }));
  const warmupEnd = performance.now() + (o.warmupS ?? 2) * 1000;
  const end = warmupEnd + o.durationS * 1000;
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let ok = 0;
  let errors = 0;
  let seq = 0;
  const client = async (c: number) => {
    const pool = pools[c % pools.length];
    for (;;) {
      const start = performance.now();
      if (start >= end) return;
      const req = o.request(seq++, c);
      let status: string;
      try {
        const res = await pool.request({ method: req.method, path: req.path, headers: req.headers, body: req.body });
        await res.body.dump();
        status = String(res.statusCode);
      } catch (err) {
        status = (err as { code?: string }).code ?? 'error';
      }
      const done = performance.now();
      if (start < warmupEnd || done > end) continue;
      latencies.push(done - start);
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (/^2\d\d$/.test(status)) ok++;
      else errors++;
    }
  };
  await Promise.all(Array.from({ length: o.clients }, (_, c) => client(c)));
  await Promise.all(pools.map((p) => p.close()));
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    ok,
    errors,
    statuses,
    seconds: o.durationS,
    okPerS: round(ok / o.durationS, 1) ?? 0,
    p50Ms: round(percentile(latencies, 50)),
    p90Ms: round(percentile(latencies, 90)),
    p99Ms: round(percentile(latencies, 99)),
    maxMs: round(latencies.at(-1)),
  };
}

/**
 * Busy CPU seconds of the whole machine so far, all cores and processes (user, nice, system,
 * irq, softirq, steal of /proc/stat): over a window, what everything an operation touches cost
 * (the service's processes, PostgreSQL, Redis, the load generator, the kernel).
 */
export function machineBusySeconds(): number {
  const [, user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number);
  return (user + nice + system + irq + softirq + steal) / 100;
}

/** Cumulative user and system CPU seconds of a process, from /proc (throws once it is gone). */
export function cpuTimes(pid: number): { user: number; system: number } {
  // utime and stime are fields 14 and 15 of stat (11 and 12 after the command name), in clock ticks.
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 };
}

/** Cumulative CPU seconds (user + system) of a process, from /proc; 0 once it is gone. */
export function cpuSeconds(pid: number): number {
  try {
    const { user, system } = cpuTimes(pid);
    return user + system;
  } catch {
    return 0;
  }
}

/**
 * The process listening on a local TCP port (a shared server: PostgreSQL, Redis, a broker), found
 * through /proc: the listening socket's inode, then the process holding it. Undefined when none
 * is found (another user's process, no such listener).
 */
export function listenerPid(port: number): number | undefined {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set(
    ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((f) =>
      existsSync(f)
        ? readFileSync(f, 'utf8')
            .split('\n')
            .slice(1)
            .map((l) => l.trim().split(/\s+/))
            // State 0A is LISTEN.
            .filter((c) => c[1]?.endsWith(`:${hexPort}`) && c[3] === '0A')
            .map((c) => `socket:[${c[9]}]`)
        : [],
    ),
  );
  if (inodes.size === 0) return undefined;
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (readdirSync(`/proc/${pid}/fd`).some((fd) => inodes.has(readlinkSync(`/proc/${pid}/fd/${fd}`)))) return Number(pid);
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return undefined;
}

/** Polls `fn` until it returns true or `timeoutMs` passes; returns whether it did. */
export async function until(fn: () => Promise<boolean>, timeoutMs: number, everyMs = 100): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await fn().catch(() => false)) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

// ---------------------------------------------------------------- the stack

const PG_ADMIN = pgDatabaseUrl('postgres');

export interface BenchDatabase {
  url: string;
  drop(): Promise<void>;
}

/** A fresh, migrated database for one bench run. */
export async function createBenchDatabase(): Promise<BenchDatabase> {
  const name = `gw_bench_${randomBytes(5).toString('hex')}`;
  const url = pgDatabaseUrl(name);
  await migrate(url);
  return {
    url,
    async drop() {
      const admin = postgres(PG_ADMIN, { max: 1, onnotice: () => {} });
      await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
      await admin.end();
    },
  };
}

/**
 * Node options for the service's processes, from BENCH_NODE_ARGS: e.g.
 * `--cpu-prof --cpu-prof-dir=/tmp/prof` profiles every web and worker process of a bench.
 */
export const benchNodeArgs = (): string[] => process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];

/** Environment for the service's processes in a bench: own database and Redis prefix, no rate limit to speak of. */
export function benchEnv(databaseUrl: string, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'production',
    DATABASE_URL: databaseUrl,
    REDIS_URL: SHARED_REDIS_URL,
    REDIS_PREFIX: `bench${randomBytes(4).toString('hex')}`,
    LOG_LEVEL: 'info',
    ADMIN_TOKEN: 'bench-admin-token-0123456789',
    SECRETS_KEY: 'bench-secrets-key-0123456789abcdef0123456789',
    RATE_LIMIT_PER_MINUTE: '1000000000',
    WEBHOOK_TARGET_POLICY: 'any',
    DEMO_APP: 'false',
    ...overrides,
  };
}

export interface BenchStack {
  env: Record<string, string>;
  /** The first web process. */
  base: string;
  /** Every web process, for load spread across them (runLoad takes the list). */
  bases: string[];
  sql: Sql;
  web: ChildService[];
  workers: ChildService[];
  /** A new application and a key with the given scopes (all by default) and its auth headers. */
  createApp(scopes?: Scope[]): Promise<{ appId: string; apiKey: string; headers: Record<string, string> }>;
  stop(): Promise<void>;
}

/**
 * The service as it runs in production: `webProcesses` web processes (the first one's port is
 * `base`) and `workerProcesses` worker processes serving `workerQueues`, each its own Node
 * process, on a fresh migrated database and a fresh Redis prefix.
 */
export async function startStack(
  o: { env?: Record<string, string>; webProcesses?: number; workerProcesses?: number; workerQueues?: string } = {},
): Promise<BenchStack> {
  const db = await createBenchDatabase();
  const env = benchEnv(db.url, o.env);
  const sql = createSql(db.url, { max: 8 });
  const web: ChildService[] = [];
  const workers: ChildService[] = [];
  const ports: number[] = [];
  const stop = async () => {
    await Promise.all(
      [...web, ...workers].map(async (c) => {
        c.kill('SIGTERM');
        const timer = setTimeout(() => c.kill('SIGKILL'), 15_000);
        await c.exited;
        clearTimeout(timer);
      }),
    );
    await sql.end({ timeout: 5 });
    await deleteRedisPrefix(env.REDIS_URL, env.REDIS_PREFIX);
    await db.drop();
  };
  try {
    for (let i = 0; i < (o.workerProcesses ?? 1); i++) {
      workers.push(
        spawnService('workers/index.ts', { ...env, ...(o.workerQueues ? { WORKER_QUEUES: o.workerQueues } : {}) }, benchNodeArgs()),
      );
    }
    for (let i = 0; i < (o.webProcesses ?? 1); i++) {
      const port = await freePort();
      ports.push(port);
      web.push(spawnService('src/web.ts', { ...env, PORT: String(port) }, benchNodeArgs()));
    }
    await Promise.all(workers.map((w) => w.waitFor(/workers started/, 60_000)));
    await Promise.all(web.map((w) => w.waitFor(/web listening/, 60_000)));
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    env,
    base: `http://127.0.0.1:${ports[0]}`,
    bases: ports.map((p) => `http://127.0.0.1:${p}`),
    sql,
    web,
    workers,
    async createApp(scopes = [...SCOPES]) {
      const a = await createApplication(sql, `bench-${randomUUID().slice(0, 8)}`, scopes);
      return { appId: a.appId, apiKey: a.apiKey, headers: { Authorization: `Bearer ${a.apiKey}`, 'X-Service-App-ID': a.appId } };
    },
    stop,
  };
}

/**
 * The stack's queues as its own processes build them (src/queues.ts): QUEUE_SHARDS shards of
 * each sharded queue, on a Redis Cluster when the stack's environment names one. A bench that
 * puts jobs straight on a queue goes through these and `queueFor`, never a `new Queue` of its own.
 */
export function stackQueues(stack: BenchStack): { queues: Queues; close(): Promise<void> } {
  const config = parseConfig(stack.env);
  const connection = createRedis(config.redis, 'blocking');
  const queues = createQueues(connection, config, createLogger('silent'));
  return {
    queues,
    close: async () => {
      await closeQueues(queues);
      connection.disconnect();
    },
  };
}

/** Removes every key a bench run left under its prefix (queues, rate limits). */
export async function deleteRedisPrefix(url: string, prefix: string): Promise<void> {
  // A 'blocking' connection queues commands until connected ('request' ones fail fast, and
  // the scan below would run before the connection is up).
  const redis = createRedis(url, 'blocking');
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      if (keys.length) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/** RSS (MB) and cumulative CPU seconds (user + system) of a process, from /proc. */
export function processUsage(pid: number): { rssMb: number; cpuS: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return { rssMb: round(rssKb / 1024, 1) ?? 0, cpuS: cpuSeconds(pid) };
}

/** Starts bench/support/echo-server.ts: a bare express handler, the HTTP ceiling. */
export async function startEchoServer(status = 201): Promise<{ base: string; pid: number; stop(): Promise<void> }> {
  const port = await freePort();
  const proc = spawnService('bench/support/echo-server.ts', { PORT: String(port), ECHO_STATUS: String(status) });
  await proc.waitFor(/echo listening/, 30_000);
  return {
    base: `http://127.0.0.1:${port}`,
    pid: proc.proc.pid!,
    async stop() {
      proc.kill('SIGTERM');
      await proc.exited;
    },
  };
}

// ---------------------------------------------------------------- results

const BENCH_DIR = () => join(projectRoot(), 'bench');
const RESULTS_DIR = () => join(BENCH_DIR(), 'results');

export function machine(): Machine {
  return { cpus: cpus().length, memory_gb: Math.round(totalmem() / 2 ** 30), cpu_model: cpus()[0]?.model.trim() };
}

export const loadAverage = (): number => round(loadavg()[0], 1) ?? 0;

/**
 * The commit measured, marked `-dirty` when the work tree had uncommitted changes — other than
 * the results themselves, which the benches before this one in the same run have just written.
 */
export function currentCommit(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: projectRoot(), encoding: 'utf8' }).trim();
    const dirty = execFileSync(
      'git',
      ['status', '--porcelain', '--untracked-files=no', '--', '.', ':!bench/results', ':!bench/README.md'],
      { cwd: projectRoot(), encoding: 'utf8' },
    ).trim();
    return dirty ? `${head}-dirty` : head;
  } catch {
    return 'unknown';
  }
}

export function writeResult(result: BenchResult): string {
  mkdirSync(RESULTS_DIR(), { recursive: true });
  const file = join(RESULTS_DIR(), `${result.name}.json`);
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  return file;
}

export function readResults(): BenchResult[] {
  if (!existsSync(RESULTS_DIR())) return [];
  return readdirSync(RESULTS_DIR())
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(RESULTS_DIR(), f), 'utf8')) as BenchResult);
}

const fmt = (v: number | null | undefined) => (v === null || v === undefined ? 'not measured' : String(v));

/** A result as text rows: every figure, baseline, ratio and target. */
export function formatTable(r: BenchResult): string {
  const rows: [string, string, string][] = [['', 'value', 'target']];
  for (const [k, v] of Object.entries(r.figures)) rows.push([k, fmt(v), targetText(r, k)]);
  for (const [k, v] of Object.entries(r.baselines)) rows.push([`baseline: ${k}`, fmt(v), targetText(r, k)]);
  for (const [k, v] of Object.entries(r.ratios)) rows.push([`ratio: ${k}`, fmt(v), targetText(r, k)]);
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((row) => row[i].length)));
  return rows.map((row) => row.map((c, i) => c.padEnd(widths[i])).join('  ')).join('\n');
}

function targetText(r: BenchResult, key: string): string {
  const t = r.targets[key];
  return t ? `${t.want} ${t.met ? '(met)' : '(NOT met)'}` : '';
}

const START = '<!-- results:start (generated by `npm run bench` from bench/results/*.json; edits here are overwritten) -->';
const END = '<!-- results:end -->';

/** The capability benches first, in the order of the issues, then any others by name. */
const BENCH_ORDER = ['ingest', 'fanout', 'webhooks', 'send', 'inbound'];
const byBenchOrder = (a: BenchResult, b: BenchResult) => {
  const rank = (n: string) => (BENCH_ORDER.includes(n) ? BENCH_ORDER.indexOf(n) : BENCH_ORDER.length);
  return rank(a.name) - rank(b.name) || a.name.localeCompare(b.name);
};

export interface SummaryRow {
  figure: string;
  value: number | null;
  baseline?: { name: string; value: number | null };
  ratio?: number | null;
  /** Goals of the figure and of its ratio, e.g. "< 50", "ratio >= 0.5". */
  targets: string[];
  met: boolean[];
}

/**
 * One row per figure, or one per ratio the figure has (a ratio `<figure>_vs_<baseline>` names
 * its pair), each with the target set on the figure or on that ratio. A ratio naming no
 * figure still gets its own row, so nothing measured is left out of the summary.
 */
export function summaryRows(r: BenchResult): SummaryRow[] {
  const known = { ...r.baselines, ...r.figures };
  const pairOf = (ratioKey: string): [string, string] | undefined => {
    for (const f of Object.keys(known)) {
      const b = ratioKey.startsWith(`${f}_vs_`) ? ratioKey.slice(f.length + 4) : undefined;
      if (b !== undefined && b in known) return [f, b];
    }
    return undefined;
  };
  const ratiosOf = new Map<string, string[]>();
  const orphans: string[] = [];
  for (const key of Object.keys(r.ratios)) {
    const pair = pairOf(key);
    if (pair && pair[0] in r.figures) ratiosOf.set(pair[0], [...(ratiosOf.get(pair[0]) ?? []), key]);
    else orphans.push(key);
  }
  const goal = (key: string, label = '') =>
    r.targets[key] ? { text: `${label}${r.targets[key].want}`, met: r.targets[key].met } : undefined;
  const row = (figure: string, ratioKey?: string): SummaryRow => {
    const pair = ratioKey ? pairOf(ratioKey) : undefined;
    const goals = [goal(figure), ratioKey ? goal(ratioKey, 'ratio ') : undefined].filter((g) => g !== undefined);
    return {
      figure,
      value: r.figures[figure] ?? known[figure] ?? null,
      ...(pair ? { baseline: { name: pair[1], value: known[pair[1]] ?? null } } : {}),
      ...(ratioKey ? { ratio: r.ratios[ratioKey] } : {}),
      targets: goals.map((g) => g.text),
      met: goals.map((g) => g.met),
    };
  };
  const rows = Object.keys(r.figures).flatMap((f) => (ratiosOf.get(f) ?? [undefined]).map((k) => row(f, k)));
  for (const key of orphans) rows.push({ ...row(pairOf(key)?.[0] ?? key, key), figure: key });
  return rows;
}

const runText = (r: BenchResult) => {
  const m = r.machine;
  const load = m.load_1m_start !== undefined ? `, load ${m.load_1m_start}→${m.load_1m_end ?? '?'}` : '';
  return `${r.date.slice(0, 16).replace('T', ' ')} UTC, \`${r.commit}\`, ${m.cpus} CPUs ${m.memory_gb} GB${load}`;
};

/** The one table of the whole-service report: every figure of every bench beside its same-run baseline. */
export function renderSummary(results: BenchResult[]): string {
  const lines = [
    '| bench | figure | value | baseline (same run) | ratio | target | met | run (date, commit, machine) |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const r of [...results].sort(byBenchOrder)) {
    summaryRows(r).forEach((row, i) => {
      const baseline = row.baseline ? `${row.baseline.name} = ${fmt(row.baseline.value)}` : '';
      const ratioCell = row.ratio === undefined ? '' : fmt(row.ratio);
      const met = row.met.map((m) => (m ? 'met' : '**NOT met**')).join('; ');
      lines.push(
        `| ${i === 0 ? `**${r.name}**` : ''} | ${row.figure} | ${fmt(row.value)} | ${baseline} | ${ratioCell} | ${row.targets.join('; ')} | ${met} | ${i === 0 ? runText(r) : ''} |`,
      );
    });
  }
  return lines.join('\n');
}

function renderDetail(r: BenchResult): string {
  const lines = [
    `### ${r.name}`,
    '',
    `${runText(r)}${r.machine.cpu_model ? ` (${r.machine.cpu_model})` : ''}`,
    '',
    '| figure | value | target |',
    '|---|---|---|',
    ...Object.entries(r.figures).map(([k, v]) => `| ${k} | ${fmt(v)} | ${targetText(r, k)} |`),
    ...Object.entries(r.baselines).map(([k, v]) => `| baseline: ${k} | ${fmt(v)} | ${targetText(r, k)} |`),
    ...Object.entries(r.ratios).map(([k, v]) => `| ratio: ${k} | ${fmt(v)} | ${targetText(r, k)} |`),
  ];
  if (r.notes?.length) lines.push('', ...r.notes.map((n) => `- ${n}`));
  return lines.join('\n');
}

/** Rewrites the generated part of bench/README.md from every bench/results/*.json: the summary table, then each bench's detail. */
export function renderReadme(): void {
  const file = join(BENCH_DIR(), 'README.md');
  const text = existsSync(file) ? readFileSync(file, 'utf8') : `# Benchmarks\n\n${START}\n${END}\n`;
  const results = readResults().sort(byBenchOrder);
  const runs = [...new Set(results.map((r) => r.run_started ?? r.date))];
  const summary = [
    '### Summary',
    '',
    `${results.length} benches; ${runs.length === 1 ? 'all from one `npm run bench` run' : `from ${runs.length} separate runs (each row's run column says which)`}. ` +
      'Ratio = value ÷ baseline; "met" compares the value (or the ratio, where the target says so) with the target.',
    '',
    renderSummary(results),
  ].join('\n');
  const generated = `${START}\n${[summary, ...results.map(renderDetail)].join('\n\n')}\n${END}`;
  const i = text.indexOf(START.slice(0, 20));
  const j = text.indexOf(END);
  const next = i >= 0 && j > i ? text.slice(0, i) + generated + text.slice(j + END.length) : `${text.trimEnd()}\n\n${generated}\n`;
  writeFileSync(file, next);
}

/** What PostgreSQL did over one measured window (see `measureDb`). */
export interface DbWindow {
  /** Transactions committed in the bench database (each statement outside a transaction is one). */
  commits: number;
  /** Rows inserted, updated and deleted in it; `hotUpdates` of the updates touched no index. */
  rowsWritten: number;
  hotUpdates: number;
  /** Write-ahead log of the whole server: records, bytes and the syncs that made commits durable. */
  walRecords: number;
  walBytes: number;
  walSyncs: number;
}

/**
 * Reads PostgreSQL's own counters at `startMs` and `endMs` from now, as `measureCpu` reads CPU:
 * counts per unit say where the database's time goes (backends report their counters at most
 * once a second, so a window of several seconds is needed). The WAL figures are the server's;
 * on a quiet machine the bench is its only writer.
 */
export function measureDb(stack: BenchStack, startMs: number, endMs: number): Promise<DbWindow> {
  const read = async (): Promise<DbWindow> => {
    const [d] = await stack.sql<{ commits: string; written: string; hot: string }[]>`
      SELECT s.xact_commit AS commits, s.tup_inserted + s.tup_updated + s.tup_deleted AS written,
             (SELECT sum(n_tup_hot_upd) FROM pg_stat_user_tables) AS hot
        FROM pg_stat_database s WHERE s.datname = current_database()`;
    const [w] = await stack.sql<{ records: string; bytes: string; syncs: string }[]>`
      SELECT wal_records AS records, wal_bytes AS bytes, wal_sync AS syncs FROM pg_stat_wal`;
    return {
      commits: Number(d.commits),
      rowsWritten: Number(d.written),
      hotUpdates: Number(d.hot ?? 0),
      walRecords: Number(w.records),
      walBytes: Number(w.bytes),
      walSyncs: Number(w.syncs),
    };
  };
  return counterWindow(read, startMs, endMs);
}

/** CPU seconds per part of the system over one measured window (see `measureCpu`). */
export interface CpuWindow {
  web: number;
  worker: number;
  postgres: number;
  redis: number;
  machine: number;
}

/**
 * Reads the CPU of the stack's web and worker processes, the PostgreSQL backends of its
 * database, the Redis server and the whole machine at `startMs` and `endMs` from now: the
 * measured window of a load started now. Redis is shared with anything else on the machine;
 * on a quiet machine the bench is its only client.
 */
export function measureCpu(stack: BenchStack, startMs: number, endMs: number): Promise<CpuWindow> {
  // The Redis server's process, found by name in /proc.
  const redisPid = Number(
    readdirSync('/proc').find((d) => {
      if (!/^\d+$/.test(d)) return false;
      try {
        return readFileSync(`/proc/${d}/comm`, 'utf8').trim() === 'redis-server';
      } catch {
        return false;
      }
    }) ?? 0,
  );
  const read = async (): Promise<CpuWindow> => {
    const backends = await stack.sql<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`;
    return {
      web: stack.web.reduce((n, w) => n + cpuSeconds(w.proc.pid!), 0),
      worker: stack.workers.reduce((n, w) => n + cpuSeconds(w.proc.pid!), 0),
      postgres: backends.reduce((n, b) => n + cpuSeconds(b.pid), 0),
      redis: redisPid ? cpuSeconds(redisPid) : 0,
      machine: machineBusySeconds(),
    };
  };
  return counterWindow(read, startMs, endMs);
}

/** Reads monotonic counters at `startMs` and `endMs` from now and answers how much each moved between. */
export function counterWindow<T extends { [K in keyof T]: number }>(read: () => Promise<T>, startMs: number, endMs: number): Promise<T> {
  const at = (ms: number) => new Promise<T>((resolve, reject) => setTimeout(() => read().then(resolve, reject), ms));
  return Promise.all([at(startMs), at(endMs)]).then(
    ([a, b]) => Object.fromEntries(Object.entries(b).map(([k, v]) => [k, (v as number) - a[k as keyof T]])) as T,
  );
}

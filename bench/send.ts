/**
 * Send: (a) one Telegram connection against the Telegram fake enforcing the documented limits
 * (30 msg/s per bot, 1 msg/s per chat): 2,000 messages to 200 chats, submitted at once —
 * the rate the fake accepted them at, as a fraction of the allowed 30/s, and how many 429s
 * it had to answer. (b) 100 connections against the fake without limits: POST /v1/messages
 * answered 201 (sent and recorded) per second and its latency, beside a bare undici loop
 * sending the same sendMessage calls to the same fake (the floor), and beside POST /v1/events
 * on the same stack (the ledger's ingest rate: sending should run at least half as fast), with
 * the CPU each send costs every part of the system; then the same to recipients seen before.
 * Targets (issues 6 and 18): (a) ≥ 0.9 of the allowed rate with zero 429s; (b) ≥ 0.5 × ingest,
 * p50 < 50 ms, p99 < 150 ms, ≤ 2 ms of machine CPU per send.
 */
import { Pool } from 'undici';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { startTelegramProcess } from '../test/fakes/telegram-process.js';
import {
  measureCpu,
  measureDb,
  ratio,
  round,
  runLoad,
  spawnService,
  startStack,
  target,
  until,
  type Bench,
  type BenchStack,
  type CpuWindow,
  type DbWindow,
  type LoadRequest,
} from './lib.js';

const ALLOWED_PER_S = 30;
const LIMITED_MESSAGES = 2000;
const LIMITED_CHATS = 200;
const CONNECTIONS = 100;
const CLIENTS = 32;

type FakeProcess = Awaited<ReturnType<typeof startTelegramProcess>>;

const startFake = (limits: boolean): Promise<FakeProcess> => startTelegramProcess({ limits, keep: false });

async function createConnection(stack: BenchStack, headers: Record<string, string>, token: string, apiBase: string): Promise<string> {
  const r = await fetch(`${stack.base}/v1/platform-connections`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({
      platform_name: 'TELEGRAM',
      name: `bench ${token.split(':')[0]}`,
      config: { bot_token: token, api_base_url: apiBase },
    }),
  });
  if (r.status !== 201) throw new Error(`connection: ${r.status} ${await r.text()}`);
  return ((await r.json()) as { id: string }).id;
}

/** (a) the limited connection. */
async function limitedRun(log: (m: string) => void, notes: string[]) {
  const fake = await startFake(true);
  const stack = await startStack({ workerQueues: 'ledger,send', env: { SEND_WAIT_MS: '0' } });
  try {
    const app = await stack.createApp(['admin', 'events:write', 'events:read']);
    const conn = await createConnection(stack, app.headers, '900001:bench-limited-token', fake.url);
    log(`(a) submitting ${LIMITED_MESSAGES} messages to ${LIMITED_CHATS} chats through one connection`);
    const pool = new Pool(stack.base, { connections: 16 });
    const statuses: Record<string, number> = {};
    let next = 0;
    const submitStart = performance.now();
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (;;) {
          const i = next++;
          if (i >= LIMITED_MESSAGES) return;
          const res = await pool.request({
            method: 'POST',
            path: '/v1/messages',
            headers: { ...app.headers, 'content-type': 'application/json' },
            body: JSON.stringify({
              platform_connection_id: conn,
              to_external_id: String(200000 + (i % LIMITED_CHATS)),
              message: `limited ${i}`,
            }),
          });
          await res.body.dump();
          statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
        }
      }),
    );
    const submitS = (performance.now() - submitStart) / 1000;
    await pool.close();
    const done = await until(async () => (await fake.stats()).accepted >= LIMITED_MESSAGES, 240_000, 250);
    const s = await fake.stats();
    const [{ sent, failed }] = await stack.sql<{ sent: number; failed: number }[]>`
      SELECT count(*) FILTER (WHERE status = 'sent')::int AS sent, count(*) FILTER (WHERE status = 'failed')::int AS failed FROM outbound_messages`;
    const spanS = s.firstAt !== null && s.lastAt !== null ? (s.lastAt - s.firstAt) / 1000 : null;
    const rate = spanS ? (s.accepted - 1) / spanS : null;
    notes.push(
      `(a) ${LIMITED_MESSAGES} POSTs (16 concurrent) answered in ${submitS.toFixed(1)} s, statuses ${JSON.stringify(statuses)}; the fake accepted ${s.accepted} in ${spanS?.toFixed(1)} s` +
        `${done ? '' : ' (did not finish in 240 s)'}; outbound_messages: ${sent} sent, ${failed} failed; the fake answered ${s.limitHits} 429s`,
    );
    return { rate: round(rate), fraction: ratio(rate, ALLOWED_PER_S), limitHits: s.limitHits };
  } finally {
    await stack.stop();
    await fake.stop();
  }
}

const REPEAT_RECIPIENTS = 2000;

/** CPU ms per unit of each part, over one window. */
const perUnit = (cpu: CpuWindow, n: number) => {
  const ms = (s: number) => (n > 0 ? round((s * 1000) / n, 3) : null);
  return { web: ms(cpu.web), worker: ms(cpu.worker), postgres: ms(cpu.postgres), redis: ms(cpu.redis), machine: ms(cpu.machine) };
};

const dbPerUnit = (db: DbWindow, n: number) => {
  const per = (v: number, digits = 2) => (n > 0 ? round(v / n, digits) : null);
  return {
    commits: per(db.commits),
    rows_written: per(db.rowsWritten),
    hot_updates: per(db.hotUpdates),
    wal_records: per(db.walRecords, 1),
    wal_kb: per(db.walBytes / 1024),
    wal_syncs: per(db.walSyncs, 3),
  };
};

/**
 * (b) many unlimited connections, closed-loop clients waiting for the 201: first POST
 * /v1/events on the same stack (the ledger's ingest rate and CPU per event, the yardstick),
 * then sends to new recipients, then sends to recipients already seen (a conversation's
 * repeat messages), each measured with the CPU of every part of the system.
 */
async function openRun(durationS: number, clients: number, log: (m: string) => void, notes: string[]) {
  const fake = await startFake(false);
  const stack = await startStack({ workerQueues: 'ledger,send' });
  const warmupS = 2;
  try {
    const app = await stack.createApp(['admin', 'events:write', 'events:read']);
    const conns: string[] = [];
    for (let k = 0; k < CONNECTIONS; k++)
      conns.push(await createConnection(stack, app.headers, `${910000 + k}:bench-open-token`, fake.url));
    const json = { ...app.headers, 'content-type': 'application/json' };
    const measured = async (what: string, request: (i: number) => LoadRequest) => {
      log(`(b) ${what}: ${clients} closed-loop clients for ${durationS} s`);
      const cpu = measureCpu(stack, warmupS * 1000, (warmupS + durationS) * 1000);
      const db = measureDb(stack, warmupS * 1000, (warmupS + durationS) * 1000);
      const load = await runLoad(stack.base, { clients, durationS, warmupS, request });
      const c = await cpu;
      return { load, cpu: perUnit(c, load.ok), cpuWindow: c, db: dbPerUnit(await db, load.ok) };
    };

    const ingest = await measured('ingest (POST /v1/events, the yardstick)', (i) => ({
      method: 'POST',
      path: '/v1/events',
      headers: json,
      body: JSON.stringify({ event_type: 'bench.ingest', payload: { i, text: `event ${i}` } }),
    }));
    const send = (to: (i: number) => { conn: string; to: string }) => (i: number) => {
      const t = to(i);
      return {
        method: 'POST' as const,
        path: '/v1/messages',
        headers: json,
        body: JSON.stringify({ platform_connection_id: t.conn, to_external_id: t.to, message: `open ${i}` }),
      };
    };
    // New recipients: each send's first to that person (a platform user and a conversation created).
    const fresh = await measured(
      'sends to new recipients',
      send((i) => ({ conn: conns[i % CONNECTIONS], to: String(300000 + (i % 10_000)) })),
    );
    // Recipients the run above already sent to, each again every ~2,000 sends (within Telegram's 1/s per chat).
    const repeat = await measured(
      `sends to ${REPEAT_RECIPIENTS} recipients seen before`,
      send((i) => {
        const j = i % REPEAT_RECIPIENTS;
        return { conn: conns[j % CONNECTIONS], to: String(300000 + j) };
      }),
    );
    notes.push(
      `(b) ${CONNECTIONS} connections, ${clients} closed-loop clients, ${durationS} s measured after ${warmupS} s warm-up per phase, one web and one worker process (ledger, send) on one stack: POST /v1/events first (the yardstick: 201 after the ledger commit), then POST /v1/messages to new recipients (statuses ${JSON.stringify(fresh.load.statuses)}; 201 = the platform accepted it and sent + message.outbound are committed), then to ${REPEAT_RECIPIENTS} recipients the run had already sent to (statuses ${JSON.stringify(repeat.load.statuses)})`,
      `(b) CPU per send / per event: user + system time over the measured window of the web process, the worker process, the PostgreSQL backends of the bench database and the Redis server (/proc), and of the whole machine (/proc/stat, all cores: these plus the load generator, the fake and the kernel), divided by the requests answered 2xx in it. ms per unit — ingest: ${JSON.stringify(ingest.cpu)}; sends to new recipients: ${JSON.stringify(fresh.cpu)}; repeat recipients: ${JSON.stringify(repeat.cpu)}`,
      `(b) PostgreSQL per send / per event over the same windows (pg_stat_database of the bench database: commits, rows inserted + updated + deleted, HOT updates; pg_stat_wal of the server: records, KB, syncs) — ingest: ${JSON.stringify(ingest.db)}; sends to new recipients: ${JSON.stringify(fresh.db)}; repeat recipients: ${JSON.stringify(repeat.db)}`,
    );

    const count = Math.max(10_000, Math.round(fresh.load.okPerS * durationS));
    log(`(b) floor: ${count} bare sendMessage calls, ${clients} concurrent`);
    const bare = spawnService('bench/support/bare-send-loop.ts', {
      BARE_TARGET: fake.url,
      BARE_COUNT: String(count),
      BARE_CONCURRENCY: String(clients),
    });
    await bare.waitFor(/bare done \d+ [\d.]+/, 120_000);
    const [, ok, ms] = bare.output().match(/bare done (\d+) ([\d.]+)/)!;
    const bareRate = round(Number(ok) / (Number(ms) / 1000), 1);
    notes.push(
      `(b) floor: ${ok} sendMessage calls to the same fake by a bare undici loop in its own process, ${clients} concurrent, keep-alive`,
    );
    return { ingest, fresh, repeat, bareRate };
  } finally {
    await stack.stop();
    await fake.stop();
  }
}

const bench: Bench = {
  description:
    'sending: achieved rate under Telegram limits (one connection, 2,000 messages, 200 chats) and end-to-end sends/s over 100 connections vs a bare undici loop',
  async run({ options, log }) {
    const notes: string[] = ['web and worker are separate Node processes (NODE_ENV=production); the Telegram fake runs in its own process'];
    const load = () => loadavg()[0].toFixed(1);
    const loadBefore = load();
    const a = await limitedRun(log, notes);
    const b = await openRun(options.durationS ?? 10, options.clients ?? CLIENTS, log, notes);
    // Other work on the machine shows in every figure; say how busy it was.
    notes.push(`machine load average (1 min): ${loadBefore} at the start, ${load()} at the end`);
    return {
      figures: {
        limited_sent_per_s: a.rate,
        limited_fraction_of_allowed: a.fraction,
        limited_429s: a.limitHits,
        open_sends_per_s: b.fresh.load.okPerS,
        open_post_p50_ms: b.fresh.load.p50Ms,
        open_post_p99_ms: b.fresh.load.p99Ms,
        open_errors: b.fresh.load.errors,
        open_machine_cpu_ms_per_send: b.fresh.cpu.machine,
        open_web_cpu_ms_per_send: b.fresh.cpu.web,
        open_worker_cpu_ms_per_send: b.fresh.cpu.worker,
        open_postgres_cpu_ms_per_send: b.fresh.cpu.postgres,
        open_redis_cpu_ms_per_send: b.fresh.cpu.redis,
        repeat_sends_per_s: b.repeat.load.okPerS,
        repeat_post_p50_ms: b.repeat.load.p50Ms,
        repeat_post_p99_ms: b.repeat.load.p99Ms,
        repeat_machine_cpu_ms_per_send: b.repeat.cpu.machine,
        open_pg_commits_per_send: b.fresh.db.commits,
        open_pg_rows_written_per_send: b.fresh.db.rows_written,
        open_wal_syncs_per_send: b.fresh.db.wal_syncs,
      },
      baselines: {
        allowed_per_s: ALLOWED_PER_S,
        bare_send_calls_per_s: b.bareRate,
        ingest_committed_per_s: b.ingest.load.okPerS,
        ingest_machine_cpu_ms_per_event: b.ingest.cpu.machine,
        ingest_pg_commits_per_event: b.ingest.db.commits,
        ingest_pg_rows_written_per_event: b.ingest.db.rows_written,
        ingest_wal_syncs_per_event: b.ingest.db.wal_syncs,
      },
      ratios: {
        open_sends_per_s_vs_bare_send_calls_per_s: ratio(b.fresh.load.okPerS, b.bareRate),
        open_sends_per_s_vs_ingest_committed_per_s: ratio(b.fresh.load.okPerS, b.ingest.load.okPerS),
        repeat_sends_per_s_vs_ingest_committed_per_s: ratio(b.repeat.load.okPerS, b.ingest.load.okPerS),
        open_machine_cpu_ms_per_send_vs_ingest_machine_cpu_ms_per_event: ratio(b.fresh.cpu.machine, b.ingest.cpu.machine),
      },
      targets: {
        limited_fraction_of_allowed: target(a.fraction, '>=', 0.9),
        limited_429s: target(a.limitHits, '<=', 0),
        open_sends_per_s_vs_ingest_committed_per_s: target(ratio(b.fresh.load.okPerS, b.ingest.load.okPerS), '>=', 0.5),
        open_post_p50_ms: target(b.fresh.load.p50Ms, '<', 50),
        open_post_p99_ms: target(b.fresh.load.p99Ms, '<', 150),
        open_machine_cpu_ms_per_send: target(b.fresh.cpu.machine, '<=', 2),
      },
      notes,
    };
  },
};
export default bench;

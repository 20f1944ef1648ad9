/**
 * Where a send's database time goes: `npx tsx bench/support/profile-send.ts [fresh|repeat]`.
 *
 * Runs the send bench's open phase (100 connections, 32 closed-loop clients, 10 s) on a private
 * PostgreSQL server started with pg_stat_statements (the machine's own server is never touched),
 * then prints the CPU per send of each process and, per statement, its time, calls, rows,
 * buffers and WAL records per send — the figures that found the ledger's full-table anti-joins
 * (bench/README, send). `repeat` first sends to new recipients, then measures sends to
 * recipients seen before. It also prints the web's and the worker's user and system CPU and
 * their read/write system calls per send (/proc/PID/io). With PROFILE_EXPLAIN=DIR (a directory
 * the postgres user can write), auto_explain logs the plans of 3% of the statements, with their
 * buffers and WAL, into DIR — how the cached plans that read outbound_messages whole were found.
 * PROFILE_CLIENTS sets the closed-loop clients (32: the bench's); PROFILE_SQL is run on the
 * bench database before the load, for experiments on the schema (a constraint or an index
 * dropped). Statement times include planning (track_planning), shown on their own too.
 * A profiling aid, not a benchmark: pg_stat_statements costs a little itself, and nothing is
 * recorded.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';

const phase = process.argv[2] === 'repeat' ? 'repeat' : 'fresh';
const CONNECTIONS = 100;
const CLIENTS = Number(process.env.PROFILE_CLIENTS ?? 32);
const SECONDS = 10;

if (!process.env.PROFILE_SEND_DATABASE_URL) {
  // The helpers read DATABASE_URL once, when first imported: the load runs in a child process
  // that gets the private server's address from the start.
  const { startPostgresServer } = await import('../../test/helpers/postgres-server.js');
  const server = await startPostgresServer({
    settings: {
      shared_preload_libraries: 'pg_stat_statements',
      'pg_stat_statements.track': 'all',
      'pg_stat_statements.track_planning': 'on',
      'pg_stat_statements.max': '5000',
      shared_buffers: '128MB',
      max_connections: '100',
      ...(process.env.PROFILE_EXPLAIN
        ? {
            shared_preload_libraries: 'pg_stat_statements,auto_explain',
            'auto_explain.log_min_duration': '0',
            'auto_explain.log_analyze': 'on',
            'auto_explain.log_buffers': 'on',
            'auto_explain.log_wal': 'on',
            'auto_explain.sample_rate': '0.03',
            logging_collector: 'on',
            log_directory: process.env.PROFILE_EXPLAIN,
          }
        : {}),
    },
  });
  try {
    const url = `${server.base}/postgres`;
    spawnSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), phase], {
      stdio: 'inherit',
      env: { ...process.env, DATABASE_URL: url, PROFILE_SEND_DATABASE_URL: url },
    });
  } finally {
    await server.destroy();
  }
  process.exit(0);
}

const { default: postgres } = await import('postgres');
const { counterWindow, cpuTimes, measureCpu, runLoad, startStack } = await import('../lib.js');
const { startTelegramProcess } = await import('../../test/fakes/telegram-process.js');

const admin = postgres(process.env.PROFILE_SEND_DATABASE_URL, { max: 1, onnotice: () => {} });
await admin`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`;
/** user/system CPU seconds and read/write system calls of a process, from /proc. */
const procCounters = (pid: number) => {
  const io = Object.fromEntries(
    readFileSync(`/proc/${pid}/io`, 'utf8')
      .trim()
      .split('\n')
      .map((l) => l.split(': ')),
  );
  return { ...cpuTimes(pid), syscr: Number(io.syscr), syscw: Number(io.syscw) };
};
const fake = await startTelegramProcess({ limits: false, keep: false });
const stack = await startStack({ workerQueues: 'ledger,send' });
try {
  // An experiment's schema change (dropped constraints or indexes…), made before the load.
  if (process.env.PROFILE_SQL) await stack.sql.unsafe(process.env.PROFILE_SQL);
  const app = await stack.createApp(['admin', 'events:write', 'events:read']);
  const headers = { ...app.headers, 'content-type': 'application/json' };
  const conns: string[] = [];
  for (let k = 0; k < CONNECTIONS; k++) {
    const r = await fetch(`${stack.base}/v1/platform-connections`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        platform_name: 'TELEGRAM',
        name: `profile ${k}`,
        config: { bot_token: `${920000 + k}:profile-token`, api_base_url: fake.url },
      }),
    });
    conns.push(((await r.json()) as { id: string }).id);
  }
  const send = (to: (i: number) => number) => (i: number) => ({
    method: 'POST' as const,
    path: '/v1/messages',
    headers,
    body: JSON.stringify({
      platform_connection_id: conns[to(i) % CONNECTIONS],
      to_external_id: String(300000 + to(i)),
      message: `profile ${i}`,
    }),
  });
  const fresh = send((i) => i % 10_000);
  if (phase === 'repeat') await runLoad(stack.base, { clients: CLIENTS, durationS: 6, warmupS: 1, request: fresh });
  await admin`SELECT pg_stat_statements_reset()`;
  const cpu = measureCpu(stack, 0, SECONDS * 1000);
  const pids = { web: stack.web[0].proc.pid!, worker: stack.workers[0].proc.pid! };
  const sys = counterWindow(
    async () =>
      Object.fromEntries(
        Object.entries(pids).flatMap(([name, pid]) => Object.entries(procCounters(pid)).map(([k, v]) => [`${name}.${k}`, v])),
      ),
    0,
    SECONDS * 1000,
  );
  const load = await runLoad(stack.base, {
    clients: CLIENTS,
    durationS: SECONDS,
    warmupS: 0,
    request: phase === 'repeat' ? send((i) => i % 2000) : fresh,
  });
  const c = await cpu;
  const sends = load.ok;
  const per = (seconds: number) => ((seconds * 1000) / sends).toFixed(3);
  console.log(`${phase}: ${load.okPerS} sends/s, p50 ${load.p50Ms} ms, ${sends} sends`);
  // Below 100 %, the closed loop is bound by waits (round trips, serial sections), not by the cores.
  console.log(`machine busy ${((c.machine / (SECONDS * cpus().length)) * 100).toFixed(0)}% of ${cpus().length} cores`);
  console.log(
    `CPU ms per send: web ${per(c.web)}, worker ${per(c.worker)}, PostgreSQL ${per(c.postgres)}, Redis ${per(c.redis)}, machine ${per(c.machine)}`,
  );
  const s = await sys;
  for (const name of Object.keys(pids))
    console.log(
      `${name}: user ${per(s[`${name}.user`])} ms, system ${per(s[`${name}.system`])} ms, write calls ${(s[`${name}.syscw`] / sends).toFixed(2)}, read calls ${(s[`${name}.syscr`] / sends).toFixed(2)} per send`,
    );
  const rows = await admin<
    { calls: number; ms: number; plan: number; rows: number; blocks: number; wal: number; query: string }[]
  >`SELECT calls, total_exec_time + total_plan_time AS ms, total_plan_time AS plan, rows, shared_blks_hit + shared_blks_read AS blocks, wal_records AS wal, query
      FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' ORDER BY 2 DESC LIMIT 25`;
  console.log('ms/send  plan/send  calls/send  rows/call  buffers/call  WAL/send  statement');
  for (const r of rows)
    console.log(
      [
        (r.ms / sends).toFixed(4),
        (r.plan / sends).toFixed(4),
        (r.calls / sends).toFixed(3),
        (Number(r.rows) / r.calls).toFixed(1),
        (Number(r.blocks) / r.calls).toFixed(0),
        (Number(r.wal) / sends).toFixed(1),
        r.query.replace(/\s+/g, ' ').slice(0, 160),
      ].join('  '),
    );
} finally {
  await stack.stop();
  await fake.stop();
  await admin.end();
}

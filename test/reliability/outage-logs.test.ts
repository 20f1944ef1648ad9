import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_URL } from '../helpers/db.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { createTestEnv, freePort, spawnService, type ChildService, type TestEnv } from '../helpers/stack.js';

/**
 * During a Redis outage each worker process printed about 60 raw multi-line `Error: connect
 * ECONNREFUSED` stack traces outside its JSON log: BullMQ forwards every failed reconnect of
 * the connection its queues share to Queue `error` events nobody handled (printed raw), and
 * each Worker logged every attempt of its own connections as an error. Now every connection a
 * process makes, to Redis or PostgreSQL, logs one JSON line when it is lost and one when it is
 * back, and counts the loss in /metrics — in the web process and the workers alike.
 */
interface LogLine {
  level: number;
  msg: string;
  kind?: string;
  connection?: string;
}

/** The outage must span several reconnect attempts (ioredis retries every 50 ms to 1 s): one quiet line is the claim. */
const OUTAGE_MS = 5_000;

let redis: RedisServer;
let t: TestEnv;
let web: ChildService;
let worker: ChildService;
let webPort: number;
let workerMetricsPort: number;

beforeAll(async () => {
  // This file's own redis-server: stopping it disturbs no one else.
  redis = await startRedisServer({ durable: true });
  t = await createTestEnv({ REDIS_URL: redis.url, LOG_LEVEL: 'info' });
  [webPort, workerMetricsPort] = await Promise.all([freePort(), freePort()]);
  web = spawnService('src/web.ts', { ...t.env, PORT: String(webPort) });
  worker = spawnService('workers/index.ts', { ...t.env, WORKER_METRICS_PORT: String(workerMetricsPort) });
  await Promise.all([web.waitFor(/web listening/), worker.waitFor(/workers started/)]);
}, 90_000);
afterAll(async () => {
  for (const p of [web, worker]) {
    p?.kill('SIGTERM');
    await p?.exited;
  }
  await redis?.destroy();
  await t?.dropDatabase();
});

/** Every whole line a process printed after `from`; a line that is not JSON is kept as its text. */
function linesOf(p: ChildService, from: number): (LogLine | string)[] {
  const out = p.output();
  return out
    .slice(from, out.lastIndexOf('\n') + 1)
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => {
      try {
        return JSON.parse(l) as LogLine;
      } catch {
        return l;
      }
    });
}
const named = (lines: (LogLine | string)[], msg: RegExp) =>
  lines.filter((l): l is LogLine => typeof l !== 'string' && msg.test(l.msg)).map((l) => `${l.kind}:${l.connection}`);
const LOST = /connection lost/;
const RESTORED = /connection restored/;

async function metricsText(url: string): Promise<string> {
  const r = await fetch(url);
  return r.text();
}
/** Losses counted per `kind:name` in a /metrics text. */
function lossesOf(text: string): Map<string, number> {
  const counted = new Map<string, number>();
  for (const m of text.matchAll(/^connection_losses_total\{kind="([^"]+)",name="([^"]+)"\} (\d+)$/gm))
    counted.set(`${m[1]}:${m[2]}`, Number(m[3]));
  return counted;
}

const processes = () =>
  [
    { name: 'web', p: web, metrics: `http://127.0.0.1:${webPort}/metrics` },
    { name: 'worker', p: worker, metrics: `http://127.0.0.1:${workerMetricsPort}/metrics` },
  ] as const;

/**
 * Breaks `kind` for OUTAGE_MS with `stop`, mends it with `start`, and checks what both
 * processes printed meanwhile: JSON only, one "lost" and one "restored" line per connection
 * of that kind, nothing else at warn or above, and each loss counted once in /metrics.
 * Returns the connections that reported, per process.
 */
async function outage(kind: 'redis' | 'postgres', stop: () => Promise<unknown>, start: () => Promise<unknown>) {
  // Both processes connected before the outage: /readyz answers once the web's Redis and PostgreSQL are up.
  await expect.poll(async () => (await fetch(`http://127.0.0.1:${webPort}/readyz`)).status, { timeout: 20_000 }).toBe(200);
  const from = { web: web.output().length, worker: worker.output().length };
  const before = new Map<string, Map<string, number>>();
  for (const { name, metrics } of processes()) before.set(name, lossesOf(await metricsText(metrics)));

  await stop();
  const lostLine = new RegExp(`${kind === 'redis' ? 'Redis' : 'PostgreSQL'} connection lost`);
  await Promise.all([web.waitFor(lostLine, 10_000), worker.waitFor(lostLine, 10_000)]);
  await new Promise((r) => setTimeout(r, OUTAGE_MS));
  await start();

  // Each connection that reported a loss reports its return.
  for (const { name, p } of processes())
    await expect
      .poll(() => named(linesOf(p, from[name]), RESTORED).sort(), { timeout: 20_000 })
      .toEqual(named(linesOf(p, from[name]), LOST).sort());

  // Nothing outside the JSON log: no "Error: connect ECONNREFUSED" and its "at …" lines.
  expect({
    web: linesOf(web, from.web).filter((l) => typeof l === 'string'),
    worker: linesOf(worker, from.worker).filter((l) => typeof l === 'string'),
  }).toEqual({ web: [], worker: [] });

  const reported: Record<string, string[]> = {};
  for (const { name, p, metrics } of processes()) {
    const lines = linesOf(p, from[name]);
    const lost = named(lines, LOST);
    // Said once each way per connection, and only for the kind that broke.
    expect(new Set(lost).size, `${name} lost: ${lost.join(', ')}`).toBe(lost.length);
    expect(named(lines, RESTORED).sort(), name).toEqual([...lost].sort());
    expect(
      lost.every((k) => k.startsWith(`${kind}:`)),
      lost.join(', '),
    ).toBe(true);
    // The outage says nothing else at warn or above: no error per reconnect attempt.
    const loud = lines.filter((l): l is LogLine => typeof l !== 'string' && l.level >= 40 && !LOST.test(l.msg));
    expect(loud, name).toEqual([]);
    const counted = lossesOf(await metricsText(metrics));
    for (const k of lost) expect((counted.get(k) ?? 0) - (before.get(name)?.get(k) ?? 0), `${name} ${k}`).toBe(1);
    reported[name] = lost;
  }
  return reported;
}

describe('an outage in the logs', () => {
  it('of Redis: one JSON "lost" and one "restored" line per connection, BullMQ\'s own included, no stack traces, each loss counted', async () => {
    const reported = await outage(
      'redis',
      () => redis.stop('SIGKILL'),
      () => redis.start(),
    );
    // Every connection of each process went through the watch.
    expect(reported.web.sort()).toEqual(['redis:changes', 'redis:commit reports', 'redis:queues', 'redis:requests', 'redis:wakes']);
    // The worker's include those BullMQ duplicates from ours: each Worker's blocking connection.
    expect(reported.worker.sort()).toEqual(
      ['changes', 'queues', 'requests', 'workers', ...t.config.WORKER_QUEUES.map((q) => `workers/${q.queue}`)]
        .map((n) => `redis:${n}`)
        .sort(),
    );
  }, 120_000);

  it('of PostgreSQL: one JSON "lost" and one "restored" line per pool, each loss counted', async () => {
    // This file's own database refuses connections and its sessions end: the server stays up for everyone else.
    const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
    const db = new URL(t.env.DATABASE_URL).pathname.slice(1);
    const allow = (yes: boolean) => admin.unsafe(`ALTER DATABASE "${db}" ALLOW_CONNECTIONS ${yes}`);
    try {
      const reported = await outage(
        'postgres',
        async () => {
          await allow(false);
          await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${db} AND pid <> pg_backend_pid()`;
        },
        () => allow(true),
      );
      // The web's /readyz asks PostgreSQL on a connection of its own, watched as well.
      expect({ web: reported.web.sort(), worker: reported.worker }).toEqual({
        web: ['postgres:pool', 'postgres:readiness'],
        worker: ['postgres:pool'],
      });
    } finally {
      await allow(true);
      await admin.end();
    }
  }, 120_000);
});

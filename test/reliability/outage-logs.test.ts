import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { createTestEnv, freePort, spawnService, type ChildService, type TestEnv } from '../helpers/stack.js';

/**
 * During a Redis outage each worker process printed about 60 raw multi-line `Error: connect
 * ECONNREFUSED` stack traces outside its JSON log: BullMQ forwards every failed reconnect of
 * the connections it shares or duplicates to Queue and Worker `error` events nobody handled
 * (or logged each as an error). Now every connection a process makes logs one JSON line when
 * it is lost and one when it is back, and counts the loss in /metrics.
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

/** Every line a process printed after `from`; a line that is not JSON is kept as its text. */
function linesOf(p: ChildService, from: number): (LogLine | string)[] {
  return p
    .output()
    .slice(from)
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

describe('a Redis outage in the logs', () => {
  it('gives one JSON "lost" and one "restored" line per connection, no stack traces, and a loss counted per connection', async () => {
    // Both processes connected before the outage: /readyz answers once the web's Redis is up.
    await expect.poll(async () => (await fetch(`http://127.0.0.1:${webPort}/readyz`)).status, { timeout: 20_000 }).toBe(200);
    const from = { web: web.output().length, worker: worker.output().length };

    await redis.stop('SIGKILL');
    await Promise.all([web.waitFor(LOST, 10_000), worker.waitFor(LOST, 10_000)]);
    await new Promise((r) => setTimeout(r, OUTAGE_MS));
    await redis.start();

    for (const [name, p] of [
      ['web', web],
      ['worker', worker],
    ] as const) {
      // Each connection that reported a loss reports its return.
      await expect
        .poll(
          () => {
            const lines = linesOf(p, from[name]);
            return named(lines, RESTORED).sort();
          },
          { timeout: 20_000 },
        )
        .toEqual(named(linesOf(p, from[name]), LOST).sort());
    }

    // Nothing outside the JSON log: no "Error: connect ECONNREFUSED" and its "at …" lines.
    expect({
      web: linesOf(web, from.web).filter((l) => typeof l === 'string'),
      worker: linesOf(worker, from.worker).filter((l) => typeof l === 'string'),
    }).toEqual({ web: [], worker: [] });

    for (const [name, p, metricsUrl] of [
      ['web', web, `http://127.0.0.1:${webPort}/metrics`],
      ['worker', worker, `http://127.0.0.1:${workerMetricsPort}/metrics`],
    ] as const) {
      const lines = linesOf(p, from[name]);
      const lost = named(lines, LOST);
      const restored = named(lines, RESTORED);
      // Every connection of the process went through the watch, and said so once each way.
      expect(lost.length, `${name}: ${lost.join(', ')}`).toBeGreaterThan(1);
      expect(new Set(lost).size, `${name} lost: ${lost.join(', ')}`).toBe(lost.length);
      expect(restored.sort(), name).toEqual([...lost].sort());
      expect(lost.every((k) => k.startsWith('redis:'))).toBe(true);
      // The outage says nothing else at warn or above: no error per reconnect attempt.
      const loud = lines.filter((l): l is LogLine => typeof l !== 'string' && l.level >= 40 && !LOST.test(l.msg));
      expect(loud, name).toEqual([]);
      // The watched connections include those BullMQ opens on its own (a worker's blocking duplicates).
      if (name === 'worker') expect(lost.filter((k) => k.startsWith('redis:workers')).length).toBeGreaterThan(1);

      const counted = lossesOf(await metricsText(metricsUrl));
      for (const k of lost) expect(counted.get(k), `${name} ${k}`).toBe(1);
    }
  }, 120_000);
});

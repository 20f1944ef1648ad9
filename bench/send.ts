/**
 * Send: (a) one Telegram connection against the Telegram fake enforcing the documented limits
 * (30 msg/s per bot, 1 msg/s per chat): 2,000 messages to 200 chats, submitted at once —
 * the rate the fake accepted them at, as a fraction of the allowed 30/s, and how many 429s
 * it had to answer. (b) 100 connections against the fake without limits: POST /v1/messages
 * answered 201 (sent and recorded) per second and its latency, beside a bare undici loop
 * sending the same sendMessage calls to the same fake (the floor). Targets (issue 6):
 * (a) ≥ 0.9 of the allowed rate with zero 429s.
 */
import { Pool } from 'undici';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { startTelegramProcess } from '../test/fakes/telegram-process.js';
import { ratio, round, runLoad, spawnService, startStack, target, until, type Bench, type BenchStack } from './lib.js';

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

/** (b) many unlimited connections, closed-loop clients waiting for the 201. */
async function openRun(durationS: number, clients: number, log: (m: string) => void, notes: string[]) {
  const fake = await startFake(false);
  const stack = await startStack({ workerQueues: 'ledger,send' });
  try {
    const app = await stack.createApp(['admin', 'events:write', 'events:read']);
    const conns: string[] = [];
    for (let k = 0; k < CONNECTIONS; k++)
      conns.push(await createConnection(stack, app.headers, `${910000 + k}:bench-open-token`, fake.url));
    log(`(b) ${clients} closed-loop clients over ${CONNECTIONS} connections for ${durationS} s`);
    const load = await runLoad(stack.base, {
      clients,
      durationS,
      warmupS: 2,
      request: (i) => ({
        method: 'POST',
        path: '/v1/messages',
        headers: { ...app.headers, 'content-type': 'application/json' },
        body: JSON.stringify({
          platform_connection_id: conns[i % CONNECTIONS],
          to_external_id: String(300000 + (i % 10_000)),
          message: `open ${i}`,
        }),
      }),
    });
    notes.push(
      `(b) ${CONNECTIONS} connections, ${clients} closed-loop clients, ${durationS} s measured after 2 s warm-up; statuses ${JSON.stringify(load.statuses)} (201 = sent and its message.outbound recorded)`,
    );

    const count = Math.max(10_000, Math.round(load.okPerS * durationS));
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
    return { load, bareRate };
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
        open_sends_per_s: b.load.okPerS,
        open_post_p50_ms: b.load.p50Ms,
        open_post_p99_ms: b.load.p99Ms,
        open_errors: b.load.errors,
      },
      baselines: { allowed_per_s: ALLOWED_PER_S, bare_send_calls_per_s: b.bareRate },
      ratios: { open_sends_per_s_vs_bare_send_calls_per_s: ratio(b.load.okPerS, b.bareRate) },
      targets: {
        limited_fraction_of_allowed: target(a.fraction, '>=', 0.9),
        limited_429s: target(a.limitHits, '<=', 0),
      },
      notes,
    };
  },
};
export default bench;

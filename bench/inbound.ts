/**
 * Inbound: N concurrent senders POST signed Telegram updates and WhatsApp webhooks at the
 * receiver (web process) backed by a separate worker process (inbound + ledger queues),
 * against a bare express handler answering 200 under the same load — the HTTP ceiling.
 * Figures (issue 7): acknowledged/s, acknowledgement latency (target p99 < 10 ms at 32
 * senders) and receipt → message.inbound committed latency, under full load and paced.
 */
import { createHmac } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import {
  machineBusySeconds,
  percentile,
  processUsage,
  ratio,
  round,
  runLoad,
  stackQueues,
  startEchoServer,
  startStack,
  target,
  until,
  type Bench,
  type BenchStack,
  type LoadRequest,
} from './lib.js';

const TG_SECRET = 'bench_secret-token';
const WA_SECRET = 'bench-wa-app-secret';
const WA_PHONE = '1065550001';
const WA_WABA = '2065550001';
/** Distinct users the senders speak as: realistic reuse of platform users and conversations. */
const USERS = 200;
/** Paced phase: requests per second, open loop, so latency is measured without a backlog. */
const PACED_PER_S = 100;

interface Sender {
  request(i: number): LoadRequest & { externalId: string };
}

function senders(tgPath: string, waPath: string, runTag: number): Sender {
  return {
    request(i) {
      const user = 100_000 + (i % USERS);
      if (i % 2 === 0) {
        const id = runTag * 10_000_000 + i;
        const body = JSON.stringify({
          update_id: id,
          message: {
            message_id: id,
            from: { id: user, is_bot: false, first_name: 'Bench', last_name: `U${user}` },
            chat: { id: user, type: 'private' },
            date: Math.floor(Date.now() / 1000),
            text: `hello ${i}`,
          },
        });
        return {
          method: 'POST',
          path: tgPath,
          headers: { 'content-type': 'application/json', 'x-telegram-bot-api-secret-token': TG_SECRET } as Record<string, string>,
          body,
          externalId: `${user}:${id}`,
        };
      }
      const wamid = `wamid.bench${runTag}.${i}`;
      const body = JSON.stringify({
        object: 'whatsapp_business_account',
        entry: [
          {
            id: WA_WABA,
            changes: [
              {
                field: 'messages',
                value: {
                  messaging_product: 'whatsapp',
                  metadata: { display_phone_number: '15550001111', phone_number_id: WA_PHONE },
                  contacts: [{ profile: { name: `U${user}` }, wa_id: String(user) }],
                  messages: [
                    {
                      from: String(user),
                      id: wamid,
                      timestamp: String(Math.floor(Date.now() / 1000)),
                      type: 'text',
                      text: { body: `hello ${i}` },
                    },
                  ],
                },
              },
            ],
          },
        ],
      });
      const sig = `sha256=${createHmac('sha256', WA_SECRET).update(body).digest('hex')}`;
      return {
        method: 'POST',
        path: waPath,
        headers: { 'content-type': 'application/json', 'x-hub-signature-256': sig },
        body,
        externalId: wamid,
      };
    },
  };
}

/**
 * Receipt → committed latency (ms) of the messages of one phase, from the ledger's created_at.
 * Phases run one after another, each drained before the next, so the phase is committed once
 * the application holds `totalSoFar` inbound messages: the wait polls that index-backed count
 * (matching thousands of ids in every poll would cost PostgreSQL CPU that the workers being
 * measured need), and the ids are matched once, at the end.
 */
async function commitLatencies(
  stack: BenchStack,
  appId: string,
  sentAt: Map<string, number>,
  totalSoFar: number,
  epochOffset: number,
  timeoutMs: number,
) {
  const ids = [...sentAt.keys()];
  const committed = async () =>
    (await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE app_id = ${appId} AND event_type = 'message.inbound'`)[0]
      .n;
  const started = performance.now();
  const all = await until(async () => (await committed()) >= totalSoFar, timeoutMs, 100);
  const drainedAt = performance.now();
  const rows = await stack.sql<{ ext: string; at: Date }[]>`
    SELECT payload->>'external_message_id' AS ext, created_at AS at FROM events
     WHERE app_id = ${appId} AND event_type = 'message.inbound' AND payload->>'external_message_id' = ANY(${ids}::text[])`;
  const lat = rows.map((r) => r.at.getTime() - (sentAt.get(r.ext)! + epochOffset)).sort((a, b) => a - b);
  const last = rows.reduce((m, r) => Math.max(m, r.at.getTime()), 0);
  return {
    all,
    committed: rows.length,
    waitedS: (drainedAt - started) / 1000,
    lastCommitEpochMs: last,
    p50: round(percentile(lat, 50)),
    p99: round(percentile(lat, 99)),
    max: round(lat.at(-1)),
  };
}

async function setup(stack: BenchStack) {
  const app = await stack.createApp();
  const post = async (platform_name: string, config: Record<string, unknown>) => {
    const r = await fetch(`${stack.base}/v1/platform-connections`, {
      method: 'POST',
      headers: { ...app.headers, 'content-type': 'application/json' },
      body: JSON.stringify({ platform_name, name: `bench ${platform_name}`, config }),
    });
    if (r.status !== 201) throw new Error(`creating the ${platform_name} connection answered ${r.status}: ${await r.text()}`);
    return new URL(((await r.json()) as { webhook_url: string }).webhook_url).pathname;
  };
  const tgPath = await post('TELEGRAM', { bot_token: '123456:bench-bot', secret_token: TG_SECRET });
  const waPath = await post('WHATSAPP', {
    access_token: 't',
    phone_number_id: WA_PHONE,
    business_account_id: WA_WABA,
    app_secret: WA_SECRET,
    verify_token: 'v',
  });
  return { app, tgPath, waPath };
}

const bench: Bench = {
  description: 'signed Telegram + WhatsApp webhooks at the receiver (web + inbound/ledger worker processes) vs a bare express 200',
  async run({ options, log }) {
    const clients = options.clients ?? 32;
    const durationS = options.durationS ?? 10;
    // Other work on the machine skews every figure, baseline included: recorded with the run.
    const loadAtStart = loadavg()[0];

    log(`baseline: bare express handler, ${clients} senders, ${durationS} s`);
    const echo = await startEchoServer(200);
    const probe = senders('/webhooks/a/b', '/webhooks/a/b', 0);
    const echoCpu = cpuPerRequest(echo.pid);
    const { http, httpCpuUs, httpPaced } = await runLoad(echo.base, { clients, durationS, request: echoCpu.count((i) => probe.request(i)) })
      .then((r) => ({ http: r, httpCpuUs: echoCpu.usPerRequest() }))
      .then(async (r) => ({ ...r, httpPaced: await pacedRun(echo.base, probe, PACED_PER_S, durationS) }))
      .finally(() => echo.stop());

    // The per-connection flood guard and the per-source limit (every request comes from
    // 127.0.0.1) would (rightly) refuse a benchmark's rate: lifted here.
    const stack = await startStack({
      workerQueues: 'inbound,ledger',
      env: { INBOUND_FLOOD_PER_SECOND: '1000000', INBOUND_PER_SOURCE_PER_MINUTE: '100000000' },
    });
    // Every shard of the inbound queue (QUEUE_SHARDS), paused and resumed together.
    const { queues, close: closeQueues } = stackQueues(stack);
    const inboundQueue = {
      pause: () => Promise.all(queues.shards.inbound.map((q) => q.pause())),
      resume: () => Promise.all(queues.shards.inbound.map((q) => q.resume())),
    };
    try {
      const { app, tgPath, waPath } = await setup(stack);
      // performance.now() is relative; the ledger stamps wall-clock time.
      const epochOffset = Date.now() - performance.now();
      const timed = (s: Sender, sentAt: Map<string, number>) => (i: number) => {
        const r = s.request(i);
        sentAt.set(r.externalId, performance.now());
        return r;
      };

      // A: the receiver alone — workers paused, so acknowledgement is measured without them on the CPUs.
      log(`A: receiver only (inbound queue paused), ${clients} senders, ${durationS} s`);
      await inboundQueue.pause();
      const sentA = new Map<string, number>();
      const webCpu = cpuPerRequest(stack.web[0].proc.pid!);
      const ackOnly = await runLoad(stack.base, {
        clients,
        durationS,
        warmupS: 2,
        request: webCpu.count(timed(senders(tgPath, waPath, 1), sentA)),
      });
      const ackCpuUs = webCpu.usPerRequest();
      log(`A: ${ackOnly.okPerS} acknowledged/s; resuming the workers to drain ${sentA.size} deliveries`);
      const drainStart = Date.now();
      // CPU of the worker process and the machine over the drain: steadier than the rate under noise.
      const drainCpu0 = { worker: processUsage(stack.workers[0].proc.pid!).cpuS, machine: machineBusySeconds() };
      await inboundQueue.resume();
      const drainA = await commitLatencies(stack, app.appId, sentA, sentA.size, epochOffset, 600_000);
      const workerPerS = round(drainA.committed / Math.max(0.001, (drainA.lastCommitEpochMs - drainStart) / 1000), 1);
      const perDrained = (s: number) => round((s * 1e6) / Math.max(1, drainA.committed), 0);
      const workerCpuUsPerDelivery = perDrained(processUsage(stack.workers[0].proc.pid!).cpuS - drainCpu0.worker);
      const machineCpuUsPerDelivery = perDrained(machineBusySeconds() - drainCpu0.machine);

      // B: everything at once — senders as fast as acknowledged, workers committing behind them.
      log(`B: receiver and workers together, ${clients} senders, ${durationS} s`);
      const sentB = new Map<string, number>();
      const mixed = await runLoad(stack.base, { clients, durationS, warmupS: 2, request: timed(senders(tgPath, waPath, 2), sentB) });
      const commitB = await commitLatencies(stack, app.appId, sentB, sentA.size + sentB.size, epochOffset, 600_000);

      // C: a steady rate the workers keep up with — receipt → commit without a backlog.
      log(`C: paced ${PACED_PER_S} deliveries/s for ${durationS} s`);
      const paced = await pacedRun(stack.base, senders(tgPath, waPath, 3), PACED_PER_S, durationS);
      const commitC = await commitLatencies(
        stack,
        app.appId,
        paced.sentAt,
        sentA.size + sentB.size + paced.sentAt.size,
        epochOffset,
        120_000,
      );

      const figures = {
        acknowledged_per_s: ackOnly.okPerS,
        web_cpu_us_per_ack: ackCpuUs,
        ack_p50_ms: ackOnly.p50Ms,
        ack_p99_ms: ackOnly.p99Ms,
        ack_max_ms: ackOnly.maxMs,
        worker_committed_per_s: workerPerS,
        worker_cpu_us_per_delivery: workerCpuUsPerDelivery,
        machine_cpu_us_per_drained_delivery: machineCpuUsPerDelivery,
        mixed_acknowledged_per_s: mixed.okPerS,
        mixed_ack_p99_ms: mixed.p99Ms,
        mixed_receipt_to_commit_p50_ms: commitB.p50,
        mixed_receipt_to_commit_p99_ms: commitB.p99,
        paced_ack_p50_ms: paced.p50,
        paced_ack_p99_ms: paced.p99,
        paced_receipt_to_commit_p50_ms: commitC.p50,
        paced_receipt_to_commit_p99_ms: commitC.p99,
        errors: ackOnly.errors + mixed.errors + paced.errors,
      };
      const baselines = {
        http_200_per_s: http.okPerS,
        http_p50_ms: http.p50Ms,
        http_p99_ms: http.p99Ms,
        http_cpu_us_per_request: httpCpuUs,
        http_paced_p50_ms: httpPaced.p50,
        http_paced_p99_ms: httpPaced.p99,
      };
      const ratios = {
        acknowledged_per_s_vs_http_200_per_s: ratio(ackOnly.okPerS, http.okPerS),
        ack_p99_ms_vs_http_p99_ms: ratio(ackOnly.p99Ms, http.p99Ms),
        paced_ack_p50_ms_vs_http_paced_p50_ms: ratio(paced.p50, httpPaced.p50),
        paced_ack_p99_ms_vs_http_paced_p99_ms: ratio(paced.p99, httpPaced.p99),
        web_cpu_us_per_ack_vs_http_cpu_us_per_request: ratio(ackCpuUs, httpCpuUs),
        worker_committed_per_s_vs_http_200_per_s: ratio(workerPerS, http.okPerS),
      };
      return {
        figures,
        baselines,
        ratios,
        targets: { ack_p99_ms: target(ackOnly.p99Ms, '<', 10) },
        notes: [
          `${clients} closed-loop senders, ${durationS} s per phase after 2 s warm-up, alternating Telegram updates (secret-token header) and WhatsApp payloads (X-Hub-Signature-256) from ${USERS} users; 1 web + 1 worker process (inbound, ledger; NODE_ENV=production), load generator in the bench process, all on this ${cpus().length}-CPU machine with PostgreSQL and Redis`,
          "web_cpu_us_per_ack: CPU time (user + system, /proc) of the web process during phase A (warm-up included) / requests sent in it; the baseline is the same for the bare express process. Contention inflates both (a quiet machine spends far less per request), but their ratio moves much less with the machine's load than the latencies do",
          `A (ack_*, acknowledged_per_s): inbound queue paused while measuring, then resumed: worker_committed_per_s = ${drainA.committed} deliveries / time from resume to the last commit; worker_cpu_us_per_delivery and machine_cpu_us_per_drained_delivery: CPU of the worker process (inbound + ledger) and busy time of the whole machine (PostgreSQL and Redis included; the web is idle then) from resume until the drain was seen complete, per delivery`,
          `B (mixed_*): workers running during the load; receipt → commit includes the backlog they build (${commitB.committed} of ${sentB.size} committed, the last ${round(commitB.waitedS, 1)} s after the load)`,
          `C (paced_*): ${PACED_PER_S} deliveries/s open loop; ${commitC.committed} of ${paced.sentAt.size} committed; the bare express handler is paced the same way (http_paced_*).`,
          'receipt → commit = ledger created_at − when the sender started the request (one clock)',
          `statuses A ${JSON.stringify(ackOnly.statuses)}, B ${JSON.stringify(mixed.statuses)}; baseline ${JSON.stringify(http.statuses)}`,
          'INBOUND_FLOOD_PER_SECOND lifted to 1000000 and INBOUND_PER_SOURCE_PER_MINUTE to 100000000 for the run (the defaults, 200/s per connection and 60000/min per address, would answer 429)',
          `machine load average (1 min) ${round(loadAtStart, 1)} at the start and ${round(loadavg()[0], 1)} at the end of the run`,
        ],
      };
    } finally {
      await closeQueues();
      await stack.stop();
    }
  },
};

/** CPU time a process spends per request, over the requests `count` sees it sent. */
function cpuPerRequest(pid: number) {
  const cpu0 = processUsage(pid).cpuS;
  let sent = 0;
  return {
    count<R>(request: (i: number) => R) {
      return (i: number) => {
        sent++;
        return request(i);
      };
    },
    usPerRequest: () => round(((processUsage(pid).cpuS - cpu0) / Math.max(1, sent)) * 1e6, 0),
  };
}

/** Open-loop deliveries at a fixed rate; returns each one's send time and the ack p99. */
async function pacedRun(base: string, s: Sender, perS: number, durationS: number) {
  const pool = new Pool(base, { connections: 16 });
  const sentAt = new Map<string, number>();
  const lat: number[] = [];
  const total = perS * durationS;
  const t0 = performance.now();
  const inflight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = t0 + (i * 1000) / perS;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const r = s.request(i);
    const start = performance.now();
    sentAt.set(r.externalId, start);
    inflight.push(
      pool.request({ method: r.method, path: r.path, headers: r.headers, body: r.body }).then(async (res) => {
        await res.body.dump();
        if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}`);
        lat.push(performance.now() - start);
      }),
    );
  }
  let errors = 0;
  await Promise.all(inflight.map((p) => p.catch(() => void errors++)));
  await pool.close();
  lat.sort((a, b) => a - b);
  return {
    sentAt,
    errors,
    p50: round(percentile(lat, 50)),
    p90: round(percentile(lat, 90)),
    p99: round(percentile(lat, 99)),
    max: round(lat.at(-1)),
  };
}

export default bench;

/**
 * `npm run chaos [-- --short] [-- --cluster] [-- --scenario name,name] [-- --verbose]`
 *
 * Starts the service as real processes (2 web, 2 worker, a fresh database) on private servers
 * — one redis-server and one PostgreSQL, or with `--cluster` a 3 + 3 Redis Cluster and a
 * primary with its standby (chaos/cluster.ts) — runs each scenario under steady mixed load, reconciles what clients were told
 * against the ledger, the readers, the webhook receivers and the platform fake, prints one
 * table, and exits 1 when anything was lost, doubled or skipped, or a request answered 500 or
 * hung. See chaos/README.md.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { SHARDED_QUEUES } from '../src/config.js';
import { queueFor } from '../src/queues.js';
import { startCluster, type AppCredentials, type Cluster } from './cluster.js';
import { FAILOVER_SCENARIOS } from './failover-scenarios.js';
import { startTelegramFake, startWebhookReceiver, type TelegramFake, type WebhookReceiver } from './fakes.js';

import {
  call,
  eventWrites,
  inboundWrites,
  sendWrites,
  startCursorReader,
  startSseReader,
  startWriters,
  type Tally,
  type Writes,
} from './load.js';
import { failed, formatTable, reconcileStream, reconcileWrites, total, type Row } from './reconcile.js';
import { SCENARIOS, type Scenario, type Timing } from './scenarios.js';

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    short: { type: 'boolean', default: false },
    cluster: { type: 'boolean', default: false },
    scenario: { type: 'string' },
    verbose: { type: 'boolean', default: false },
  },
});
const short = values.short!;
const names = [...SCENARIOS, ...FAILOVER_SCENARIOS].map((s) => s.name);
const chosen = values.scenario
  ? values.scenario.split(',').map((s) => s.trim())
  : (values.cluster ? FAILOVER_SCENARIOS : SCENARIOS).filter((s) => !('optIn' in s && s.optIn)).map((s) => s.name);
const unknown = chosen.filter((n) => !names.includes(n));
if (unknown.length) {
  process.stderr.write(`unknown scenario ${unknown.join(', ')}; available: ${names.join(', ')}\n`);
  process.exit(2);
}
// Each topology's scenarios in their catalog's order (a failover scenario may leave the next one's servers changed).
const singleScenarios = SCENARIOS.filter((s) => chosen.includes(s.name));
const failoverScenarios = FAILOVER_SCENARIOS.filter((s) => chosen.includes(s.name));

const timing: Timing = short
  ? { warmupMs: 1_500, downMs: 2_000, outageMs: 4_000, settleMs: 2_000 }
  : { warmupMs: 4_000, downMs: 5_000, outageMs: 20_000, settleMs: 5_000 };
/** Clients per kind of load and their pause between writes (ms). */
const load = short
  ? { events: 3, sends: 2, inbound: 2, pauseMs: 30, readers: 2, streams: 2 }
  : { events: 5, sends: 3, inbound: 3, pauseMs: 10, readers: 3, streams: 4 };
/** After the writers stop: how long in-flight writes may keep retrying, and how long everything may take to settle. */
const GRACE_MS = 30_000;
const DRAIN_MS = 60_000;
/**
 * A job active longer than this is stuck (the frozen webhook pipeline of a stranded driver
 * renewed its locks for minutes and passed every loss check): the longest legitimate run is a
 * platform or webhook call (a few seconds here) or a ledger batch waiting out an outage.
 */
const STUCK_MS = 45_000;
/** After the drain every queue must come to rest: no job left active. */
const REST_MS = 20_000;
const WEBHOOK_SECRET_BYTES = 24;

const started = Date.now();
const log = (m: string) => process.stdout.write(`[chaos ${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${m}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const contractFaults = (what: string, t: Tally) =>
  Object.entries(t.statuses)
    .filter(([s]) => s === '500' || s === 'hang')
    .map(([s, n]) => `${what}: ${n} × ${s === 'hang' ? 'no answer within 30 s' : 'HTTP 500'}`);

/** What one scenario's application is wired to: a Telegram connection on the fake and a webhook receiver. */
async function wire(cluster: Cluster, app: AppCredentials, telegram: TelegramFake) {
  const secretToken = `chaos-${randomBytes(8).toString('hex')}`;
  const base = cluster.liveWebBases()[0];
  const conn = await call(`${base}/v1/platform-connections`, {
    method: 'POST',
    headers: app.headers,
    body: {
      platform_name: 'TELEGRAM',
      name: 'chaos',
      config: { bot_token: '123456:chaos-bot-token', secret_token: secretToken, api_base_url: telegram.base },
    },
  });
  if (conn.status !== '201') throw new Error(`creating the Telegram connection answered ${conn.status} ${JSON.stringify(conn.json)}`);
  const secret = randomBytes(WEBHOOK_SECRET_BYTES).toString('hex');
  const receiver = await startWebhookReceiver(secret);
  const sub = await call(`${base}/v1/webhook-subscriptions`, {
    method: 'POST',
    headers: app.headers,
    body: { name: 'chaos', target_url: receiver.url, event_patterns: ['*'], secret },
  });
  if (sub.status !== '201') throw new Error(`creating the webhook subscription answered ${sub.status} ${JSON.stringify(sub.json)}`);
  return { connectionId: conn.json.id as string, webhookPath: new URL(conn.json.webhook_url as string).pathname, secretToken, receiver };
}

interface Settled {
  ledger: { id: string; event_type: string; key: string | null; external_message_id: string | null }[];
  missingEvents: number;
  /** Keys of acknowledged sends neither in the ledger nor failed. */
  unsettledSends: string[];
  /** Keys of acknowledged inbound updates not in the ledger. */
  missingInbound: string[];
  undelivered: number;
}

/** Reads the ledger and checks what should be in it; `done` when nothing is outstanding. */
async function observe(
  cluster: Cluster,
  app: AppCredentials,
  w: { events: Writes; sends: Writes; inbound: Writes },
  receiver: WebhookReceiver,
): Promise<Settled & { done: boolean }> {
  const ledger = await cluster.sql<Settled['ledger']>`
    SELECT id, event_type, payload->>'key' AS key, payload->>'external_message_id' AS external_message_id
      FROM events WHERE app_id = ${app.appId} ORDER BY seq`;
  const ids = new Set(ledger.map((r) => r.id));
  const inboundIds = new Set(
    ledger.filter((r) => r.event_type.startsWith('message.') && r.event_type.endsWith('inbound')).map((r) => r.external_message_id),
  );
  const sendIds = [...w.sends.acked.values()];
  const failedSends = new Set(
    (
      await cluster.sql<
        { id: string }[]
      >`SELECT id FROM outbound_messages WHERE app_id = ${app.appId} AND id = ANY(${sendIds}::uuid[]) AND status = 'failed'`
    ).map((r) => r.id),
  );
  const s: Settled = {
    ledger,
    missingEvents: [...w.events.acked.values()].filter((id) => !ids.has(id)).length,
    unsettledSends: [...w.sends.acked].filter(([, id]) => !ids.has(id) && !failedSends.has(id)).map(([key]) => key),
    missingInbound: [...w.inbound.acked].filter(([, id]) => !inboundIds.has(id)).map(([key]) => key),
    undelivered: ledger.filter((r) => !receiver.byEvent.has(r.id)).length,
  };
  return { ...s, done: s.missingEvents + s.unsettledSends.length + s.missingInbound.length + s.undelivered === 0 };
}

/**
 * The queues every write of the load goes through at once. Webhook first attempts start in
 * the committing process (the `webhook` queue holds delayed safety nets and retries, whose
 * delays would be measured instead): their recovery shows in webhooks delivered/expected.
 */
const MEASURED_QUEUES = ['ledger', 'send', 'inbound'] as const satisfies readonly (typeof SHARDED_QUEUES)[number][];

/**
 * Seconds from `faultAt` until each queue the application's load goes through (its shard of
 * MEASURED_QUEUES) completed a job created after the fault: the slowest, and the queues that
 * completed none. A queue's completed set is scored by finish time.
 */
async function queuesBack(
  cluster: Cluster,
  appId: string,
  faultAt: number,
): Promise<{ seconds: number; measured: boolean; silent: string[] }> {
  let slowest = 0;
  const silent: string[] = [];
  for (const name of MEASURED_QUEUES) {
    const queue = queueFor(cluster.queues, name, appId);
    const done = await cluster.queueRedis.zrangebyscore(queue.keys.completed, faultAt, '+inf', 'WITHSCORES', 'LIMIT', 0, 5_000);
    let back: number | undefined;
    for (let i = 0; i < done.length && back === undefined; i += 2) {
      const created = Number(await cluster.queueRedis.hget(queue.toKey(done[i]), 'timestamp'));
      if (created >= faultAt) back = (Number(done[i + 1]) - faultAt) / 1000;
    }
    if (back === undefined) {
      silent.push(queue.name);
      // What the queue holds and who serves it: a queue with jobs waiting and workers registered
      // that took none is a stuck worker, not an idle queue (seen after redis-master-kill).
      const counts = await queue
        .getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'failed', 'paused')
        .catch((e: Error) => e.message);
      const workers = await queue.getWorkersCount().catch((e: Error) => e.message);
      log(`${queue.name} holds ${JSON.stringify(counts)}; workers registered: ${workers}`);
    } else {
      log(`${queue.name}: first job created after the fault completed ${back.toFixed(1)} s after it`);
      slowest = Math.max(slowest, back);
    }
  }
  return { seconds: slowest, measured: silent.length < MEASURED_QUEUES.length, silent };
}

/** Samples every queue's active jobs once a second; `stop` answers the ones seen active past STUCK_MS. */
function watchActiveJobs(cluster: Cluster) {
  const stuck = new Map<string, number>();
  let running = true;
  const loop = (async () => {
    while (running) {
      for (const { queue: q, bull } of cluster.queues.all) {
        const jobs = await bull.getActive(0, 500).catch(() => []);
        for (const j of jobs) {
          const age = Date.now() - (j.processedOn ?? Date.now());
          if (age > STUCK_MS) stuck.set(`${q}/${j.id}`, Math.max(age, stuck.get(`${q}/${j.id}`) ?? 0));
        }
      }
      await sleep(1_000);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return [...stuck].map(([job, age]) => `job ${job} active for ${Math.round(age / 1000)} s`);
    },
  };
}

/** Waits (bounded) until no queue has an active job; answers what is still active. */
async function atRest(cluster: Cluster): Promise<string[]> {
  const deadline = Date.now() + REST_MS;
  for (;;) {
    const counts = await Promise.all(
      cluster.queues.all.map(async ({ bull }) => [bull.name, await bull.getActiveCount().catch(() => -1)] as const),
    );
    const busy = counts.filter(([, n]) => n !== 0);
    if (!busy.length) return [];
    if (Date.now() > deadline) return busy.map(([q, n]) => `${n} ${q} jobs still active ${REST_MS / 1000} s after the drain`);
    await sleep(250);
  }
}

async function runScenario<C extends Cluster>(cluster: C, telegram: TelegramFake, scenario: Scenario<C>, index: number): Promise<Row> {
  log(`--- ${scenario.name}: ${scenario.description}`);
  const app = await cluster.createApp();
  const wiring = await wire(cluster, app, telegram);
  const bases = cluster.liveWebBases;
  const tag = `${scenario.name}-${randomBytes(3).toString('hex')}`;
  // Streams open before any event exists, spread over the web processes, so each must see them all.
  const streams = Array.from({ length: load.streams }, (_, i) => startSseReader({ name: `sse-${i}`, app, webBases: bases, first: i }));
  await Promise.race([Promise.all(streams.map((r) => r.ready)), sleep(10_000)]);
  const writers = {
    events: startWriters(eventWrites(app, bases, load.events, load.pauseMs, `${tag}-ev`)),
    sends: startWriters(sendWrites(app, wiring.connectionId, bases, load.sends, load.pauseMs * 3, `${tag}-send`)),
    inbound: startWriters(
      inboundWrites(wiring.webhookPath, wiring.secretToken, bases, load.inbound, load.pauseMs * 2, `${tag}-in`, (index + 1) * 10_000_000),
    ),
  };
  const readers = Array.from({ length: load.readers }, (_, i) =>
    startCursorReader({ name: `cursor-reader-${i}`, app, webBases: bases, idleMs: 50 }),
  );

  const watch = watchActiveJobs(cluster);
  await sleep(timing.warmupMs);
  let recoverySeconds: number | null = null;
  let faultAt: number | undefined;
  const check = await scenario.fault({
    cluster,
    timing,
    log,
    appId: app.appId,
    app,
    recovered: (seconds) => (recoverySeconds = seconds),
    faulted: (at) => void (faultAt ??= at),
    receiver: wiring.receiver,
    telegram,
  });
  await sleep(timing.settleMs);
  const [events, sends, inbound] = await Promise.all([
    writers.events.stop(GRACE_MS),
    writers.sends.stop(GRACE_MS),
    writers.inbound.stop(GRACE_MS),
  ]);
  const w = { events, sends, inbound };
  for (const [kind, x] of Object.entries(w)) {
    log(
      `${kind}: ${x.acked.size} acknowledged, ${x.unacked.length} unacknowledged, ${x.refused.size} refused; answers ${JSON.stringify(x.tally.statuses)}`,
    );
  }

  // Drain: wait (bounded) until every acknowledged write has its outcome and every event its delivery.
  const deadline = Date.now() + DRAIN_MS;
  let s = await observe(cluster, app, w, wiring.receiver);
  while (!s.done && Date.now() < deadline) {
    await sleep(250);
    s = await observe(cluster, app, w, wiring.receiver);
  }
  if (!s.done)
    log(
      `drain incomplete after ${DRAIN_MS / 1000} s: ${JSON.stringify({ ...s, ledger: s.ledger.length, unsettledSends: s.unsettledSends.slice(0, 10), missingInbound: s.missingInbound.slice(0, 10) })}`,
    );
  const logs = await Promise.all(readers.map((r) => r.finish()));
  s = await observe(cluster, app, w, wiring.receiver);
  const sseLogs = await Promise.all(streams.map((r) => r.finish(s.ledger.length, 20_000)));
  log(
    `streams: ${sseLogs.map((l) => `${l.name} ${new Set(l.ids).size}/${s.ledger.length} events, ${l.reconnects} reconnects`).join('; ')}`,
  );
  logs.push(...sseLogs);
  await wiring.receiver.stop();

  const ticks = reconcileWrites(
    events.acked,
    s.ledger.filter((r) => r.event_type === 'chaos.tick').map((r) => ({ id: r.id, key: r.key ?? undefined })),
  );
  if (ticks.lost) log(`lost event keys: ${ticks.lostKeys.slice(0, 10).join(', ')}`);
  const inboundRows = s.ledger.filter((r) => r.event_type.startsWith('message.') && r.event_type.endsWith('inbound'));
  const inboundDup = inboundRows.length - new Set(inboundRows.map((r) => r.external_message_id)).size;
  const sendKeys = [...sends.acked.keys()];
  // A send the fake read while silent counts as a call too: it may have been delivered.
  const doubled = sendKeys.filter((k) => (telegram.accepted.get(k) ?? 0) + (telegram.heard.get(k) ?? 0) > 1);
  const outcomes = await cluster.sql<{ outcome: string; n: number }[]>`
    SELECT CASE WHEN status = 'failed' THEN 'failed ' || (error->>'code') ELSE status END AS outcome, count(*)::int AS n
      FROM outbound_messages WHERE app_id = ${app.appId} GROUP BY 1 ORDER BY 1`;
  log(`send outcomes: ${outcomes.map((o) => `${o.outcome} ${o.n}`).join(', ')}`);
  if (doubled.length) log(`sends doubled: ${doubled.slice(0, 10).join(', ')}`);

  // Acknowledged as queued (202, inbound 200) and gone: what REDIS_WAIT_REPLICAS exists to prevent.
  const queuedLost =
    ticks.lostKeys.filter((k) => events.queued.has(k)).length +
    s.unsettledSends.filter((k) => sends.queued.has(k)).length +
    s.missingInbound.filter((k) => inbound.queued.has(k)).length;
  let queuesBackSeconds: number | null = null;
  let firstCreatedSeconds: number | null = null;
  if (faultAt !== undefined) {
    const at = faultAt;
    // Unmeasured rather than failed when the load gave nothing to time (a slow machine may
    // answer every write 202, or send nothing after the fault): the loss columns judge the run.
    const back = await queuesBack(cluster, app.appId, at);
    if (back.measured) queuesBackSeconds = back.seconds;
    for (const q of back.silent) log(`queue ${q} completed no job created after the fault: not measured`);
    const first = Math.min(...events.created.filter((c) => c.sentAt >= at).map((c) => c.at));
    if (Number.isFinite(first)) firstCreatedSeconds = (first - at) / 1000;
    log(
      `every queue processing again ${queuesBackSeconds?.toFixed(1) ?? '-'} s after the fault; first 201 ${firstCreatedSeconds?.toFixed(1) ?? '-'} s after it`,
    );
  }

  const order = s.ledger.map((r) => r.id);
  let gaps = 0;
  let dups = 0;
  for (const l of logs) {
    const r = reconcileStream(order, l.ids);
    gaps += r.gaps;
    dups += r.duplicates;
  }
  const faults = [
    ...(await watch.stop()),
    ...(await atRest(cluster)),
    ...(check ? await check() : []),
    ...Object.entries(w).flatMap(([kind, x]) => contractFaults(kind, x.tally)),
    ...logs.flatMap((l) => contractFaults(l.name, l.tally)),
    ...Object.entries(w).flatMap(([kind, x]) => [...x.refused].slice(0, 3).map(([k, why]) => `${kind} ${k} refused: ${why}`)),
    ...(wiring.receiver.badSignatures ? [`${wiring.receiver.badSignatures} webhook deliveries with an invalid signature`] : []),
  ];
  return {
    scenario: scenario.name,
    acknowledged: events.acked.size + sends.acked.size + inbound.acked.size,
    committed: s.ledger.length,
    lost: ticks.lost + s.unsettledSends.length + s.missingInbound.length,
    queuedLost,
    duplicated: ticks.duplicated + inboundDup,
    streamGaps: gaps,
    streamDuplicates: dups,
    webhooksDelivered: s.ledger.length - s.undelivered,
    webhooksExpected: s.ledger.length,
    webhooksRepeated: [...wiring.receiver.byEvent.values()].reduce((n, times) => n + times - 1, 0),
    sendsDoubled: doubled.length,
    recoverySeconds,
    queuesBackSeconds,
    firstCreatedSeconds,
    faults,
  };
}

const telegram = await startTelegramFake();
const serviceEnv = {
  EVENT_WAIT_MS: '5000',
  SEND_WAIT_MS: '3000',
  // A silent platform settles a send as DELIVERY_UNCERTAIN after this; production waits 15 s.
  PLATFORM_TIMEOUT_MS: '2000',
  // Production spreads webhook retries over 2.5 h; the harness over ~15 s, same number of attempts.
  WEBHOOK_RETRY_DELAYS_MS: '0,1000,2000,4000,8000',
};
const rows: Row[] = [];
let crashed: unknown;
let violationCount = 0;
let scenarioIndex = 0;

/** Runs `scenarios` on one cluster of the topology they need, started for them and stopped after. */
async function runOn<C extends Cluster>(start: () => Promise<C>, scenarios: Scenario<C>[]): Promise<void> {
  if (!scenarios.length || crashed !== undefined) return;
  let cluster: C;
  try {
    cluster = await start();
  } catch (err) {
    crashed = err;
    log(`harness error: ${err instanceof Error ? err.stack : String(err)}`);
    return;
  }
  try {
    for (const scenario of scenarios) {
      const crashesBefore = cluster.crashes().length;
      const row = await runScenario(cluster, telegram, scenario, scenarioIndex++);
      row.faults.push(
        ...cluster
          .crashes()
          .slice(crashesBefore)
          .map((c) => `process crash: ${c}`),
      );
      rows.push(row);
      for (const f of row.faults) log(`FAULT ${f}`);
    }
  } catch (err) {
    crashed = err;
    log(`harness error: ${err instanceof Error ? err.stack : String(err)}`);
  } finally {
    const violations = cluster.contractViolations();
    violationCount += violations.length;
    for (const v of violations.slice(0, 10)) log(`500 in the logs: ${v}`);
    const bad = crashed !== undefined || rows.some(failed) || violations.length > 0;
    if (bad || values.verbose) process.stdout.write(`\nprocess output (tails):\n${cluster.outputs()}\n`);
    log(`full process logs in ${cluster.saveLogs()}`);
    await cluster.stop();
  }
}

const processes = { webProcesses: 2, workerProcesses: 2, log, env: serviceEnv };
try {
  const singleEnv = Object.assign({}, serviceEnv, ...singleScenarios.map((s) => s.serviceEnv ?? {}));
  await runOn(() => startCluster({ topology: 'single', ...processes, env: singleEnv }), singleScenarios);
  await runOn(() => startCluster({ topology: 'ha', ...processes }), failoverScenarios);
} finally {
  log(`platform fake answers: ${JSON.stringify(telegram.answers)}`);
  await telegram.stop();
}

const all = rows.length > 1 ? [...rows, total(rows)] : rows;
process.stdout.write(`\n${formatTable(all)}\n\n`);
const ok = crashed === undefined && !rows.some(failed) && rows.length === chosen.length && violationCount === 0;
log(ok ? 'PASS: nothing lost, doubled or skipped' : 'FAIL');
process.exit(ok ? 0 : 1);

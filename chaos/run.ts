/**
 * `npm run chaos [-- --short] [-- --scenario name,name]`
 *
 * Starts the service as real processes (2 web, 2 worker, a private durable Redis, a fresh
 * database), runs each scenario under steady load, reconciles what clients were told against
 * the ledger and the readers, prints one table, and exits 1 when anything was lost, doubled,
 * skipped or answered 500/hung. See chaos/README.md.
 */
import { parseArgs } from 'node:util';
import { startCluster, type Cluster } from './cluster.js';
import { startCursorReader, startEventWriters, type Tally } from './load.js';
import { failed, formatTable, reconcileStream, reconcileWrites, total, type Row } from './reconcile.js';
import { SCENARIOS, type Scenario, type Timing } from './scenarios.js';

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: { short: { type: 'boolean', default: false }, scenario: { type: 'string' }, verbose: { type: 'boolean', default: false } },
});
const short = values.short!;
const chosen = values.scenario ? values.scenario.split(',').map((s) => s.trim()) : SCENARIOS.map((s) => s.name);
const unknown = chosen.filter((n) => !SCENARIOS.some((s) => s.name === n));
if (unknown.length) {
  process.stderr.write(`unknown scenario ${unknown.join(', ')}; available: ${SCENARIOS.map((s) => s.name).join(', ')}\n`);
  process.exit(2);
}

const timing: Timing = short ? { warmupMs: 1_500, downMs: 2_000, settleMs: 2_000 } : { warmupMs: 4_000, downMs: 5_000, settleMs: 5_000 };
const load = short ? { writers: 3, pauseMs: 20, readers: 2 } : { writers: 6, pauseMs: 5, readers: 3 };
/** After the writers stop: how long in-flight writes may keep retrying, and how long the ledger may take to catch up. */
const GRACE_MS = 30_000;
const DRAIN_MS = 60_000;

const started = Date.now();
const log = (m: string) => process.stdout.write(`[chaos ${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${m}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const contractFaults = (what: string, t: Tally) =>
  Object.entries(t.statuses)
    .filter(([s]) => s === '500' || s === 'hang')
    .map(([s, n]) => `${what}: ${n} × ${s === 'hang' ? 'no answer within 30 s' : 'HTTP 500'}`);

async function runScenario(cluster: Cluster, scenario: Scenario): Promise<Row> {
  log(`--- ${scenario.name}: ${scenario.description}`);
  const app = await cluster.createApp();
  const writers = startEventWriters({ app, webBases: cluster.liveWebBases, writers: load.writers, pauseMs: load.pauseMs, tag: scenario.name });
  const readers = Array.from({ length: load.readers }, (_, i) => startCursorReader({ name: `cursor-reader-${i}`, app, webBases: cluster.liveWebBases, idleMs: 50 }));

  await sleep(timing.warmupMs);
  await scenario.fault({ cluster, timing, log });
  await sleep(timing.settleMs);
  const writes = await writers.stop(GRACE_MS);
  log(`writers stopped: ${writes.acked.size} acknowledged, statuses ${JSON.stringify(writes.tally.statuses)}`);

  // Drain: every acknowledged event should reach the ledger; wait (bounded) for the last ones.
  const ackedIds = [...writes.acked.values()];
  const deadline = Date.now() + DRAIN_MS;
  for (;;) {
    const [{ n }] = await cluster.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE app_id = ${app.appId} AND id = ANY(${ackedIds}::uuid[])`;
    if (n === ackedIds.length) break;
    if (Date.now() > deadline) {
      log(`drain: ${ackedIds.length - n} acknowledged events still missing after ${DRAIN_MS / 1000} s`);
      break;
    }
    await sleep(250);
  }
  const logs = await Promise.all(readers.map((r) => r.finish()));

  const ledger = await cluster.sql<{ id: string; key: string | null }[]>`
    SELECT id, payload->>'key' AS key FROM events WHERE app_id = ${app.appId} ORDER BY seq`;
  const w = reconcileWrites(writes.acked, ledger.map((r) => ({ id: r.id, key: r.key ?? undefined })));
  if (w.lost) log(`lost keys: ${w.lostKeys.slice(0, 10).join(', ')}${w.lost > 10 ? ' …' : ''}`);
  const order = ledger.map((r) => r.id);
  let gaps = 0;
  let dups = 0;
  for (const l of logs) {
    const s = reconcileStream(order, l.ids);
    gaps += s.gaps;
    dups += s.duplicates;
  }
  const faults = [
    ...contractFaults('event writes', writes.tally),
    ...logs.flatMap((l) => contractFaults(l.name, l.tally)),
    ...[...writes.refused].slice(0, 5).map(([k, why]) => `write ${k} refused: ${why}`),
  ];
  return {
    scenario: scenario.name,
    acknowledged: writes.acked.size,
    committed: ledger.length,
    lost: w.lost,
    duplicated: w.duplicated,
    streamGaps: gaps,
    streamDuplicates: dups,
    webhooksDelivered: null,
    webhooksExpected: null,
    sendsDoubled: null,
    faults,
  };
}

const cluster = await startCluster({
  webProcesses: 2,
  workerProcesses: 2,
  log,
  env: {
    // A killed worker's jobs are taken over after ~5 s instead of 30 s, so a run stays short.
    JOB_LOCK_MS: '5000',
    EVENT_WAIT_MS: '5000',
  },
});
const rows: Row[] = [];
let crashed: unknown;
let violationCount = 0;
try {
  for (const name of chosen) {
    const row = await runScenario(cluster, SCENARIOS.find((s) => s.name === name)!);
    rows.push(row);
    for (const f of row.faults) log(`FAULT ${f}`);
  }
} catch (err) {
  crashed = err;
  log(`harness error: ${err instanceof Error ? err.stack : String(err)}`);
} finally {
  const violations = cluster.contractViolations();
  violationCount = violations.length;
  for (const v of violations.slice(0, 10)) log(`500 in the logs: ${v}`);
  const bad = crashed !== undefined || rows.some(failed) || violations.length > 0;
  if (bad || values.verbose) process.stdout.write(`\nprocess output (tails):\n${cluster.outputs()}\n`);
  log(`full process logs in ${cluster.saveLogs()}`);
  await cluster.stop();
}

const all = rows.length > 1 ? [...rows, total(rows)] : rows;
process.stdout.write(`\n${formatTable(all)}\n\n`);
const ok = crashed === undefined && !rows.some(failed) && rows.length === chosen.length && violationCount === 0;
log(ok ? 'PASS: nothing lost, doubled or skipped' : 'FAIL');
process.exit(ok ? 0 : 1);

/**
 * `npm run chaos:job-locks [-- --seconds 20] [-- --burn 10] [-- --block 0] [-- --locks 2000,3000,4000,6000] [-- --hogs 0,3,7]`
 *
 * The trade-off behind JOB_LOCK_MS, measured: how often a live worker starved of CPU loses its
 * job locks (its jobs are then run again by another worker) at each lock duration. A worker
 * process with the service's lock options (workers/host.ts, jobLockOptions) runs jobs that each
 * burn some CPU (a ledger batch's serialising, a payload's parsing) and wait on I/O, pinned to
 * one core together with `hogs` busy-looping processes (sharing it with whatever else runs there),
 * and optionally held by one synchronous stall of `block` ms every 4 s (a long GC pause).
 * An unstarved observer runs the stalled-job check, as a healthy worker elsewhere would. Prints
 * one table: per setting, jobs done, locks lost, jobs taken away (stalled) and the worker's
 * event-loop delay. Uses the Redis at REDIS_URL (default 127.0.0.1:6379) under a fresh prefix.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Queue, QueueEvents, Worker } from 'bullmq';
import { createRedis } from '../src/redis.js';
import { jobLockOptions } from '../workers/host.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';
const STALL_CHECK_MS = 1_000;
/** Jobs in flight in the worker, each burning `--burn` ms of CPU (unloaded) then waiting this long on "I/O". */
const CONCURRENCY = 8;
const IO_MS = 200;
const BLOCK_EVERY_MS = 4_000;
const CORE = '1';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface WorkerReport {
  done: number;
  renewFailed: number;
  delayMaxMs: number;
  delayP99Ms: number;
}

/** The worker process: `job-locks.ts worker <lockMs> <burnMs> <blockMs> <prefix> <queue>`. Prints its report as JSON at SIGTERM. */
async function runWorker(lockMs: number, burnMs: number, blockMs: number, prefix: string, queue: string) {
  // Calibrated unloaded: iterations of a JSON round trip that take BURN_MS.
  const sample = JSON.stringify({ items: Array.from({ length: 200 }, (_, i) => ({ i, text: `item ${i}`.repeat(4) })) });
  let perMs = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < 200) {
    JSON.parse(sample);
    perMs++;
  }
  perMs /= 200;
  const burn = () => {
    for (let i = 0; i < perMs * burnMs; i++) JSON.parse(sample);
  };
  const report: WorkerReport = { done: 0, renewFailed: 0, delayMaxMs: 0, delayP99Ms: 0 };
  const delay = monitorEventLoopDelay({ resolution: 10 });
  const worker = new Worker(
    queue,
    async () => {
      burn();
      await sleep(IO_MS);
    },
    {
      connection: createRedis(REDIS_URL, 'blocking'),
      prefix,
      concurrency: CONCURRENCY,
      ...jobLockOptions({ JOB_LOCK_MS: lockMs, JOB_STALL_CHECK_MS: STALL_CHECK_MS }),
      // The observer checks; this one, starved, would see its own lapses late.
      skipStalledCheck: true,
      maxStalledCount: 1_000_000,
    },
  );
  worker.on('completed', () => report.done++);
  worker.on('lockRenewalFailed', (ids: string[]) => (report.renewFailed += ids.length));
  worker.on('error', () => {});
  await worker.waitUntilReady();
  delay.enable();
  // One synchronous stall every BLOCK_EVERY_MS (a long GC pause, a huge document parsed at once).
  if (blockMs > 0)
    setInterval(() => {
      const t = performance.now();
      while (performance.now() - t < blockMs);
    }, BLOCK_EVERY_MS);
  process.stdout.write('ready\n');
  process.on('SIGTERM', async () => {
    delay.disable();
    report.delayMaxMs = Math.round(delay.max / 1e6);
    report.delayP99Ms = Math.round(delay.percentile(99) / 1e6);
    await worker.close(true);
    process.stdout.write(`${JSON.stringify(report)}\n`);
    process.exit(0);
  });
}

function spawnPinned(args: string[]): ChildProcess {
  return spawn('taskset', ['-c', CORE, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
}

async function measure(lockMs: number, burnMs: number, blockMs: number, hogs: number, seconds: number) {
  const prefix = `joblocks-${randomBytes(4).toString('hex')}`;
  const name = 'probe';
  const connection = createRedis(REDIS_URL, 'blocking');
  const queue = new Queue(name, { connection, prefix });
  const events = new QueueEvents(name, { connection: createRedis(REDIS_URL, 'blocking'), prefix });
  let stalled = 0;
  events.on('stalled', () => stalled++);
  await events.waitUntilReady();
  const observer = new Worker(name, null, {
    connection: createRedis(REDIS_URL, 'blocking'),
    prefix,
    autorun: false,
    ...jobLockOptions({ JOB_LOCK_MS: lockMs, JOB_STALL_CHECK_MS: STALL_CHECK_MS }),
  });
  const self = fileURLToPath(import.meta.url);
  const worker = spawnPinned([
    process.execPath,
    '--import',
    'tsx',
    self,
    'worker',
    String(lockMs),
    String(burnMs),
    String(blockMs),
    prefix,
    name,
  ]);
  let out = '';
  worker.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise((r) => worker.on('exit', r));
  await Promise.race([
    (async () => {
      while (!out.includes('ready\n')) await sleep(50);
    })(),
    exited.then(() => Promise.reject(new Error(`the worker exited before it was ready: ${out}`))),
  ]);
  const hogProcs = Array.from({ length: hogs }, () => spawnPinned([process.execPath, '-e', 'for(;;){}']));
  void observer.startStalledCheckTimer();
  // Keeps the worker busy: always more jobs waiting than it runs at once.
  const until = Date.now() + seconds * 1000;
  let added = 0;
  while (Date.now() < until) {
    const waiting = await queue.getWaitingCount();
    if (waiting < CONCURRENCY * 2) {
      await queue.addBulk(Array.from({ length: CONCURRENCY * 2 }, () => ({ name, data: {}, opts: { removeOnComplete: true } })));
      added += CONCURRENCY * 2;
    }
    await sleep(100);
  }
  for (const h of hogProcs) h.kill('SIGKILL');
  worker.kill('SIGTERM');
  await exited;
  // The observer's last check may still move a lapsed job: give it one interval.
  await sleep(STALL_CHECK_MS + 100);
  const report = JSON.parse(out.trim().split('\n').pop()!) as WorkerReport;
  await observer.close();
  await events.close();
  await queue.obliterate({ force: true });
  await queue.close();
  connection.disconnect();
  return { lockMs, burnMs, blockMs, hogs, added, ...report, stalled };
}

if (process.argv[2] === 'worker') {
  await runWorker(Number(process.argv[3]), Number(process.argv[4]), Number(process.argv[5]), process.argv[6], process.argv[7]);
} else {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      seconds: { type: 'string', default: '20' },
      burn: { type: 'string', default: '10' },
      block: { type: 'string', default: '0' },
      locks: { type: 'string', default: '2000,3000,4000,6000' },
      hogs: { type: 'string', default: '0,3,7' },
    },
  });
  const rows = [];
  const list = (v: string | undefined) => v!.split(',').map(Number);
  for (const blockMs of list(values.block))
    for (const hogs of list(values.hogs))
      for (const lockMs of list(values.locks)) {
        const r = await measure(lockMs, Number(values.burn), blockMs, hogs, Number(values.seconds));
        process.stdout.write(`${JSON.stringify(r)}\n`);
        rows.push(r);
      }
  process.stdout.write(
    `\n| JOB_LOCK_MS | CPU per job (ms) | stall every 4 s (ms) | busy processes on its core | jobs done | locks lost | jobs taken away (stalled) | event-loop delay p99 / max (ms) |\n|---|---|---|---|---|---|---|---|\n`,
  );
  for (const r of rows)
    process.stdout.write(
      `| ${r.lockMs} | ${r.burnMs} | ${r.blockMs || '-'} | ${r.hogs} | ${r.done} | ${r.renewFailed} | ${r.stalled} | ${r.delayP99Ms} / ${r.delayMaxMs} |\n`,
    );
  process.exit(0);
}

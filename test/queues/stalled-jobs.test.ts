import { randomUUID } from 'node:crypto';
import { Worker, type Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueue, queueFor, type LedgerEvent } from '../../src/queues.js';
import { createRedis, type Redis } from '../../src/redis.js';
import { startWorkers } from '../../workers/index.js';
import { jobLockOptions, STALLS_TOLERATED } from '../../workers/host.js';
import { eventually } from '../helpers/connections.js';
import { startTestStack, type TestStack } from '../helpers/stack.js';

/**
 * Acknowledged work outlives a worker that keeps losing its jobs' locks. A job whose worker
 * stops renewing its lock (the process died, or — what the Redis-master-kill chaos run found —
 * its Redis connection keeps dropping while a cluster fails over on a starved machine) is
 * moved back to waiting by another worker's stall check, and counted. Past the service's stall
 * limit BullMQ fails the job for good, and an event answered 202 or an inbound update answered
 * 200 would never reach the ledger. The limit must cover minutes of such losses, and still end
 * a job that really kills every worker that takes it.
 */
let s: TestStack;
let checker: Worker;
/** A worker's kind of connection (BullMQ's blocking fetch needs one that retries forever). */
let connection: Redis;
beforeAll(async () => {
  s = await startTestStack({ workers: false, env: { JOB_STALL_CHECK_MS: '100' } });
  connection = createRedis(s.config.redis, 'blocking');
  checker = await stallChecker();
});
afterAll(async () => {
  await checker?.close();
  connection?.disconnect();
  await s.close();
});

/** A worker that runs nothing but the stall check, with the service's own lock options (the stall limit among them). */
async function stallChecker(): Promise<Worker> {
  const shard = queueFor(s.deps.queues, 'ledger');
  const w = new Worker(shard.name, null, { connection, prefix: shard.opts.prefix, ...jobLockOptions(s.config), autorun: false });
  w.on('error', () => {}); // connection errors of the test's own worker are not under test
  await w.waitUntilReady();
  await w.startStalledCheckTimer();
  return w;
}

/**
 * Takes the waiting job as a worker would and lets its lock lapse without renewing it, as a
 * worker that lost Redis (or died) does; resolves once the stall check has put it back.
 */
async function stallOnce(grabber: Worker, queue: Queue, jobId: string, n: number) {
  const job = await grabber.getNextJob(`lost-${n}`, { block: false });
  if (!job) {
    const left = await queue.getJob(jobId);
    throw new Error(`stall ${n}: nothing to take, the job is ${await left?.getState()} (${left?.failedReason})`);
  }
  expect(job.id).toBe(jobId);
  await eventually(async () => ((await job.getState()) === 'waiting' ? true : undefined), 10_000, `stall ${n} put back`);
}

/** An event queued as a 202 leaves it, its queue, and a worker to take it and lose it. */
async function queuedEvent() {
  const app = await s.createApp();
  const event: LedgerEvent = { id: randomUUID(), app_id: app.appId, event_type: 'stall.test', payload: {}, edges: [], attachments: [] };
  await enqueue(s.deps.queues, 'ledger', { event });
  const queue = queueFor(s.deps.queues, 'ledger', app.appId);
  // A short lock of its own, so each stall takes a fraction of a second instead of JOB_LOCK_MS.
  const grabber = new Worker(queue.name, null, { connection, prefix: queue.opts.prefix, lockDuration: 100, autorun: false });
  return { event, queue, grabber };
}

describe('a queued job whose worker keeps losing its lock', () => {
  it(`is still run after ${STALLS_TOLERATED} stalls: the acknowledged event reaches the ledger`, async () => {
    const { event, queue, grabber } = await queuedEvent();
    try {
      for (let n = 1; n <= STALLS_TOLERATED; n++) await stallOnce(grabber, queue, `ev-${event.id}`, n);
    } finally {
      await grabber.close();
    }
    const workers = startWorkers(s.deps, ['ledger']);
    try {
      await eventually(
        async () => ((await s.deps.sql`SELECT 1 FROM events WHERE id = ${event.id}`).length ? true : undefined),
        20_000,
        'committed',
      );
      const job = await queue.getJob(`ev-${event.id}`);
      // Completed jobs are removed at once or kept; either way it never went to the dead letter.
      if (job) expect(await job.getState()).toBe('completed');
      expect(await queue.getFailedCount()).toBe(0);
    } finally {
      await workers.close();
    }
  }, 60_000);

  it('is dead-lettered once it stalls more often than that, as a job that crashes every worker must be', async () => {
    const { event, queue, grabber } = await queuedEvent();
    try {
      for (let n = 1; n <= STALLS_TOLERATED + 1; n++) await stallOnce(grabber, queue, `ev-${event.id}`, n);
      // The next worker to take it fails it instead of running it.
      expect(await grabber.getNextJob('last', { block: false })).toBeUndefined();
    } finally {
      await grabber.close();
    }
    const job = await queue.getJob(`ev-${event.id}`);
    expect(await job!.getState()).toBe('failed');
    expect(job!.failedReason).toBe('job stalled more than allowable limit');
    expect(await s.deps.sql`SELECT 1 FROM events WHERE id = ${event.id}`).toHaveLength(0);
  }, 60_000);
});

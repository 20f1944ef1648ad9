import { randomUUID } from 'node:crypto';
import { DelayedError, Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LedgerEvent, queueFor } from '../../src/queues.js';
import { createRedis, type Redis } from '../../src/redis.js';
import { createJobClaims } from '../../src/webhooks/job-claims.js';
import { ledgerProcessor } from '../../workers/ledger.js';
import { createWorkerServices, type WorkerServices } from '../../workers/services.js';
import { webhookProcessor } from '../../workers/webhook.js';
import type { AppCredentials, TestStack } from '../helpers/stack.js';
import { eventually, type Receiver } from './receiver.js';
import { subscribedStack, type Subscribed } from './subscribed.js';

/**
 * A webhook job handed to another worker process while the first still runs it. BullMQ does
 * that once the job's lock lapses, to a worker that died and to one that is only held (a long
 * pause, a starved machine), which then sends on. The second run must not send what the first
 * is sending, and a dead first run must not strand the job.
 */
let w: Subscribed;
let s: TestStack;
let a: AppCredentials;
let rx: Receiver;
let connection: Redis;
let grabber: Worker;
let checker: Worker;
const built: WorkerServices[] = [];

beforeAll(async () => {
  w = await subscribedStack('takeover.*', { workers: false, env: { JOB_STALL_CHECK_MS: '100' } });
  ({ s, app: a, rx } = w);
  connection = createRedis(s.config.redis, 'blocking');
  const queue = queueFor(s.deps.queues, 'webhook', a.appId);
  // Takes jobs as a worker does, with a short lock it never renews: each run it starts loses the job.
  grabber = new Worker(queue.name, null, { connection, prefix: queue.opts.prefix, lockDuration: 300, autorun: false });
  // Puts a job whose lock lapsed back to waiting, as every worker's stall check does.
  checker = new Worker(queue.name, null, { connection, prefix: queue.opts.prefix, stalledInterval: 100, autorun: false });
  for (const w of [grabber, checker]) w.on('error', () => {});
  await checker.waitUntilReady();
  await checker.startStalledCheckTimer();
});
afterAll(async () => {
  await Promise.all(built.map((b) => b.close()));
  await Promise.all([grabber?.close(), checker?.close()]);
  connection?.disconnect();
  await w?.close();
});

/** A worker process's webhook processor: its own deliverer and its own claims. */
function processOf() {
  const services = createWorkerServices(s.deps, ['webhook']);
  built.push(services);
  return webhookProcessor.create(s.deps, services);
}

/** An event committed by a process that does not run the webhook queue: its first attempts are a queued job. */
async function queuedFirstAttempts(): Promise<LedgerEvent> {
  const services = createWorkerServices(s.deps, ['ledger']);
  built.push(services);
  const event: LedgerEvent = { id: randomUUID(), app_id: a.appId, event_type: 'takeover.x', payload: {}, edges: [], attachments: [] };
  const run = ledgerProcessor.create(s.deps, services);
  await run({ data: { event } } as Parameters<typeof run>[0]);
  return event;
}

const take = async (token: string, jobId: string) => {
  const job = await grabber.getNextJob(token, { block: false });
  expect(job?.id).toBe(jobId);
  return job!;
};
const received = (event: LedgerEvent) => rx.received.filter((r) => r.json?.event_id === event.id).length;

describe('a webhook job taken over by another worker process', () => {
  it('is left until the first run ends, then sends nothing that run sent', async () => {
    const event = await queuedFirstAttempts();
    const jobId = `we-${event.id}`;
    rx.answer({ status: 200, body: 'ok', delayMs: 1_500 });
    try {
      const first = processOf();
      const job = await take('first', jobId);
      const firstRun = first(job, 'first');
      firstRun.catch(() => {});
      await rx.waitFor(1, (r) => r.json?.event_id === event.id);
      // Its lock lapses while its POST waits for the answer: the job is handed out again.
      await eventually(async () => ((await job.getState()) === 'waiting' ? true : undefined), 10_000);
      const second = processOf();
      const again = await take('second', jobId);
      await expect(second(again, 'second')).rejects.toBeInstanceOf(DelayedError);
      expect(await again.getState()).toBe('delayed');
      await firstRun;
      const [row] = await s.deps.sql`SELECT status, attempt_count FROM webhook_deliveries WHERE event_id = ${event.id}`;
      expect(row).toEqual({ status: 'delivered', attempt_count: 1 });
      // Once due (brought forward here), the second run finds the delivery made.
      await again.promote();
      const last = await take('third', jobId);
      expect(await second(last, 'third')).toEqual({ attempts: 0 });
      expect(received(event)).toBe(1);
    } finally {
      rx.answer({ status: 200, body: 'ok' });
    }
  });

  it("of a worker that died: runs once that worker's claim has lapsed, and sends", async () => {
    const event = await queuedFirstAttempts();
    const jobId = `we-${event.id}`;
    // The dead worker's claim, with a lifetime short enough for a test.
    const dead = createJobClaims(s.deps.redis, 600, () => {});
    const queue = queueFor(s.deps.queues, 'webhook', a.appId);
    expect(await dead.take({ queueQualifiedName: queue.qualifiedName, id: jobId })).toBe(0);
    const next = processOf();
    const job = await take('after-death', jobId);
    await expect(next(job, 'after-death')).rejects.toBeInstanceOf(DelayedError);
    const delayed = await queue.getJob(jobId);
    expect(delayed!.delay).toBeGreaterThan(0);
    expect(delayed!.delay).toBeLessThanOrEqual(600);
    // A worker's fetch moves the job to active once it is due, not before.
    const due = await eventually(async () => grabber.getNextJob('due', { block: false }), 10_000);
    expect(due.id).toBe(jobId);
    expect(await next(due, 'due')).toEqual({ attempts: 1 });
    expect(received(event)).toBe(1);
  });
});

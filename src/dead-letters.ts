import type { Job } from 'bullmq';
import { catalogQueues, type QueueName, type Queues } from './queues.js';

/**
 * The dead letter is BullMQ's failed set: a job lands there after its last attempt, or at once
 * when it failed for good (UnrecoverableError: bad payload, data the database refuses). Failed
 * jobs are kept 7 days (src/queues.ts removeOnFail); an operator lists them, requeues one once
 * its cause is fixed, or discards it.
 */
export interface DeadLetter {
  queue: QueueName;
  id: string;
  /** Applications the job's data names (events and deliveries carry `app_id`); empty when none. */
  apps: string[];
  error: string;
  attempts: number;
  /** Seconds since the job was first queued. */
  age_s: number;
  failed_at: string | null;
}

/** The most characters of a failure reason listed: a refused payload's message can be long. */
const ERROR_CHARS = 500;

/** `app_id` values in the first levels of a job's data (a dead letter can be nested thousands deep). */
function appsOf(data: unknown, depth = 3, found = new Set<string>()): string[] {
  if (typeof data !== 'object' || data === null || depth < 0) return [...found];
  for (const [k, v] of Object.entries(data)) {
    if (k === 'app_id' && typeof v === 'string') found.add(v);
    else appsOf(v, depth - 1, found);
  }
  return [...found];
}

function describe(queue: QueueName, job: Job, now: number): DeadLetter {
  return {
    queue,
    id: job.id!,
    apps: appsOf(job.data),
    error: (job.failedReason ?? '').slice(0, ERROR_CHARS),
    attempts: job.attemptsMade,
    age_s: Math.round((now - job.timestamp) / 1000),
    failed_at: job.finishedOn ? new Date(job.finishedOn).toISOString() : null,
  };
}

/** The newest `limit` failed jobs over every shard of `queue`. */
async function newestFailed(queues: Queues, queue: QueueName, limit: number): Promise<Job[]> {
  const perShard = await Promise.all(catalogQueues(queues, queue).map((q) => q.getFailed(0, Math.max(0, limit - 1))));
  return perShard
    .flat()
    .filter((j): j is Job => Boolean(j))
    .sort((a, b) => (b.finishedOn ?? 0) - (a.finishedOn ?? 0))
    .slice(0, limit);
}

/** The newest `limit` dead-lettered jobs of `queue` (of all its shards). */
export async function listDeadLetters(queues: Queues, queue: QueueName, limit = 100): Promise<DeadLetter[]> {
  const jobs = await newestFailed(queues, queue, limit);
  const now = Date.now();
  return jobs.map((j) => describe(queue, j, now));
}

/** What became of a dead letter an operator acted on; `not_found` when no failed job has that id. */
export type DeadLetterAction = 'requeued' | 'discarded' | 'not_found';

async function failedJob(queues: Queues, queue: QueueName, id: string): Promise<Job | undefined> {
  // Job ids are unique per queue, not per shard set: the first failed one found, current shards first.
  for (const q of catalogQueues(queues, queue)) {
    const job = await q.getJob(id);
    if (job && (await job.isFailed())) return job;
  }
  return undefined;
}

/** Puts a dead-lettered job back on its queue with its attempts reset (its idempotent work is safe to redo). */
export async function requeueDeadLetter(queues: Queues, queue: QueueName, id: string): Promise<DeadLetterAction> {
  const job = await failedJob(queues, queue, id);
  if (!job) return 'not_found';
  await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
  return 'requeued';
}

/**
 * Requeues up to `limit` dead letters of `queue` (the newest first), attempts reset: after a
 * fault that failed many jobs for good (a bad deploy, a database refusing every write) is fixed.
 */
export async function requeueAllDeadLetters(queues: Queues, queue: QueueName, limit: number): Promise<number> {
  const jobs = await newestFailed(queues, queue, limit);
  let requeued = 0;
  for (const job of jobs) {
    // One may have been requeued or removed meanwhile (another operator, its retention).
    const done = await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true }).then(
      () => true,
      () => false,
    );
    if (done) requeued++;
  }
  return requeued;
}

/** Deletes a dead-lettered job for good. */
export async function discardDeadLetter(queues: Queues, queue: QueueName, id: string): Promise<DeadLetterAction> {
  const job = await failedJob(queues, queue, id);
  if (!job) return 'not_found';
  await job.remove();
  return 'discarded';
}

import { Gauge, type Registry } from 'prom-client';
import type { Queue } from 'bullmq';
import type { Queues } from './queues.js';
import type { Redis } from './redis.js';

/** The oldest active jobs looked at per queue and scrape: the stuck count stops there. */
const ACTIVE_SAMPLE = 100;

interface QueueHealth {
  /** Active jobs (of the oldest ACTIVE_SAMPLE) that started more than `stuckAfterMs` ago. */
  stuck: number;
  /** Seconds since the oldest waiting job was queued; 0 when none waits. */
  oldestWaitingS: number;
}

/**
 * Reads one queue's health with two pipelined round trips of bounded size, whatever the queue
 * holds: the oldest active ids and the oldest waiting id (BullMQ pushes new ids on the left and
 * takes from the right, so the oldest are at the right end), then their start and queue times.
 */
async function readQueueHealth(queue: Queue, stuckAfterMs: number, now: number): Promise<QueueHealth> {
  // The queues' own connection (src/queues.ts createQueues): an ioredis client, not a cluster.
  const client = (await queue.client) as unknown as Redis;
  const [[, active], [, oldestWaiting]] = (await client
    .pipeline()
    .lrange(queue.keys.active, -ACTIVE_SAMPLE, -1)
    .lindex(queue.keys.wait, -1)
    .exec()) as [[unknown, string[]], [unknown, string | null]];
  const reads = client.pipeline();
  for (const id of active) reads.hget(queue.toKey(id), 'processedOn');
  if (oldestWaiting) reads.hget(queue.toKey(oldestWaiting), 'timestamp');
  const answers = ((await reads.exec()) ?? []).map(([, v]) => (v == null ? undefined : Number(v)));
  const started = answers.slice(0, active.length);
  const queuedAt = oldestWaiting ? answers[active.length] : undefined;
  return {
    stuck: started.filter((t) => t !== undefined && now - t > stuckAfterMs).length,
    oldestWaitingS: queuedAt === undefined ? 0 : Math.max(0, (now - queuedAt) / 1000),
  };
}

/**
 * Registers the per-queue health gauges, read from Redis when scraped (a few bounded commands
 * per BullMQ queue, so per shard): `queue_stuck_jobs` (active past `stuckAfterMs`: a worker hung on something that
 * never settles) and `queue_oldest_waiting_seconds` (how far behind the queue is).
 */
export function registerQueueHealth(registry: Registry, queues: Queues, stuckAfterMs: number): void {
  let pending: Promise<Map<string, QueueHealth>> | undefined;
  // Both gauges are filled from one read per scrape.
  const read = () =>
    (pending ??= (async () => {
      const now = Date.now();
      const entries = await Promise.all(
        queues.all.map(async ({ bull }) => [bull.name, await readQueueHealth(bull, stuckAfterMs, now)] as const),
      );
      return new Map(entries);
    })().finally(() => setImmediate(() => (pending = undefined))));
  new Gauge({
    name: 'queue_stuck_jobs',
    help: `Active jobs per queue that started more than JOB_STUCK_MS (${stuckAfterMs} ms) ago (of the oldest ${ACTIVE_SAMPLE})`,
    labelNames: ['queue'] as const,
    registers: [registry],
    async collect() {
      for (const [queue, h] of await read()) this.set({ queue }, h.stuck);
    },
  });
  new Gauge({
    name: 'queue_oldest_waiting_seconds',
    help: 'Age of the oldest job waiting per queue (since it was queued); 0 when none waits',
    labelNames: ['queue'] as const,
    registers: [registry],
    async collect() {
      for (const [queue, h] of await read()) this.set({ queue }, h.oldestWaitingS);
    },
  });
}

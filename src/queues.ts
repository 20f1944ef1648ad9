import { createHash } from 'node:crypto';
import { Queue, type JobsOptions, type Telemetry } from 'bullmq';
import { z } from 'zod';
import { QUEUE_NAMES, SHARDED_QUEUES, type Config, type QueueName } from './config.js';
import { derivedId } from './ids.js';
import { redisReady, REDIS_READY_WAIT_MS, withDeadline } from './availability.js';
import type { Logger } from './logger.js';
import { replicated } from './redis-durability.js';
import { reportedByWatch, type Redis } from './redis.js';

export { QUEUE_NAMES, SHARDED_QUEUES, type QueueName };

const uuid = z.uuid();
const json = z.record(z.string(), z.unknown());

const edgeInput = z.object({
  edge_type: z.string().min(1).max(100),
  target_node_type: z.enum(['platform_user', 'file']),
  target_node_id: z.string().min(1).max(200),
});

/** An event as the ledger worker writes it: everything decided before it is enqueued. */
export const ledgerEventSchema = z.object({
  id: uuid,
  app_id: uuid,
  event_type: z.string().min(1).max(200),
  payload: json,
  edges: z.array(edgeInput).default([]),
  attachments: z.array(json).default([]),
  origin_event_id: uuid.nullish(),
  conversation_id: uuid.nullish(),
  platform_connection_id: uuid.nullish(),
  validation_errors: z.array(json).nullish(),
  /** Tags readers and subscriptions select by (src/ledger/event-scope.ts); checked where the event is made. */
  channels: z.array(z.string().max(64)).max(20).optional(),
  /**
   * The W3C traceparent of the request that submitted it, when tracing is on: one ledger job
   * carries the events of many requests, and each event's commit and deliveries are traced
   * back to its own request (src/tracing/, docs/OPERATIONS.md "Traces"). Never stored.
   */
  trace: z.string().max(100).optional(),
});
export type LedgerEvent = z.infer<typeof ledgerEventSchema>;

const eventRef = z.object({ event_id: uuid, app_id: uuid });

/** The webhook queue's jobs, tagged by `kind` (also their BullMQ job name). */
const webhookJobSchema = z.discriminatedUnion('kind', [
  // The first attempts of every delivery of one event: one job per event, so a repeat of
  // the ledger job is dropped by its id. `trace`: the event's (LedgerEvent.trace), tracing on.
  eventRef.extend({ kind: z.literal('first-attempts'), trace: z.string().max(100).optional() }),
  // The safety net of a commit batch whose first attempts started in the ledger's process:
  // one delayed job per batch.
  z.object({ kind: z.literal('first-attempts-safety-net'), events: z.array(eventRef).min(1) }),
  // A further run of one delivery (its retries, a manual retry, a replay), `attempt_base`
  // attempts into its schedule.
  z.object({
    kind: z.literal('deliver'),
    delivery_id: uuid,
    app_id: uuid,
    run: z.number().int().min(0).default(0),
    attempt_base: z.number().int().min(0).default(0),
  }),
  // Webhook log retention, scheduled here until it moved to the maintenance queue: a job an
  // older release scheduled may still be waiting, and runs the same prune.
  z.object({ kind: z.literal('log-retention') }),
]);
export type WebhookJob = z.infer<typeof webhookJobSchema>;

/**
 * Webhook jobs queued by a release from before they carried a `kind` may still wait in Redis:
 * each old shape is told apart by the field only it had.
 */
function tagUntaggedWebhookJob(d: unknown): unknown {
  if (typeof d !== 'object' || d === null || 'kind' in d) return d;
  const kind: WebhookJob['kind'] | undefined =
    'task' in d && d.task === 'log-retention'
      ? 'log-retention'
      : 'event_id' in d
        ? 'first-attempts'
        : 'events' in d
          ? 'first-attempts-safety-net'
          : 'delivery_id' in d
            ? 'deliver'
            : undefined;
  return kind ? { ...d, kind } : d;
}

/** What a job's retry policy may read from the configuration. */
export type RetryConfig = Pick<Config, 'WEBHOOK_RETRY_DELAYS_MS'>;

/** The send queue's jobs: a web process's batch, or one message. */
const sendJobSchema = z.union([
  // The sends one web process accepted in one event-loop turn: the fast path, which hands
  // every message that must wait (or retry) to its own per-message job.
  z.object({
    kind: z.literal('batch'),
    batch_id: uuid,
    messages: z.array(z.object({ app_id: uuid, id: uuid })).min(1),
    /** The web process waiting for the outcomes (its report channel). */
    reply_to: z.string().max(100).optional(),
  }),
  // One message (jobs from before batches carry no `kind`).
  z.object({
    kind: z.literal('message').optional(),
    message_id: uuid,
    app_id: uuid,
    /** Set when a rate-budget slot was reserved for this attempt (the message's attempts count then). */
    reserved_attempt: z.number().int().min(0).optional(),
    reply_to: z.string().max(100).optional(),
  }),
]);
type SendJob = z.infer<typeof sendJobSchema>;
/** The id of a message's own send job: one per message, so a repeat is dropped. */
export const messageJobId = (messageId: string) => `send-${messageId}`;

/** A catalog entry; `options` is a function of the job when its retry policy depends on it. */
interface CatalogEntry {
  schema: z.ZodType;
  /** The deterministic job id: a repeat of the same job is dropped. */
  jobId: (d: never) => string;
  /** The BullMQ job name (Bull Board shows it); the queue's name when absent. */
  name?: (d: never) => string;
  options: JobsOptions | ((d: never, config: RetryConfig) => JobsOptions);
  /** Sharded queues: what picks the job's shard (its application); shard 0 when undefined. */
  shardKey?: (d: never) => string | undefined;
  /** A batch of several applications' items: split into one payload per shard (`shard` maps a key to its shard). */
  splitByShard?: (d: never, shard: (key: string) => number) => unknown[];
}

/** Splits `items` by their shard: one group per shard, in the order first seen. */
function groupByShard<T>(items: T[], key: (item: T) => string, shard: (key: string) => number): T[][] {
  const groups = new Map<number, T[]>();
  for (const item of items) {
    const i = shard(key(item));
    groups.set(i, [...(groups.get(i) ?? []), item]);
  }
  return [...groups.values()];
}

/**
 * The scheduled housekeeping tasks of the `maintenance` queue: the pruners of
 * src/retention/registry.ts and the upkeep of the events table's partitions.
 */
export const MAINTENANCE_TASKS = [
  'prune-idempotency-keys',
  'prune-link-codes',
  'prune-files',
  'prune-messages',
  'prune-portal-sessions',
  'prune-webhook-logs',
  'event-partitions',
] as const;
export type MaintenanceTask = (typeof MAINTENANCE_TASKS)[number];

/**
 * The job catalog: each queue's payload schema, retry policy and job id. The web process
 * parses before `add`; the worker re-parses when it takes the job, so a payload that does not
 * fit is an UnrecoverableError rather than a half-done side effect.
 */
export const JOBS = {
  ledger: {
    // One event, or the events a web process received at about the same moment (one job for
    // them all); `reply_to` names the web process that waits for their commit report.
    schema: z.union([
      z.object({ event: ledgerEventSchema }),
      z.object({
        events: z.array(ledgerEventSchema).min(1).max(1000),
        reply_to: z
          .string()
          .regex(/^[A-Za-z0-9-]{1,64}$/)
          .optional(),
      }),
    ]),
    // The event id is the job id (for a batch, a digest of its event ids): a producer that
    // retries its `add` never queues twice.
    jobId: (d: { event: { id: string } } | { events: { id: string }[] }) =>
      'event' in d ? `ev-${d.event.id}` : `evb-${derivedId('ledger-batch', ...d.events.map((e) => e.id).sort())}`,
    options: { attempts: 10, backoff: { type: 'exponential', delay: 200 } },
    shardKey: (d: { event: LedgerEvent } | { events: LedgerEvent[] }) => ('event' in d ? d.event : d.events[0]).app_id,
    splitByShard: (d: { event: LedgerEvent } | { events: LedgerEvent[]; reply_to?: string }, shard: (key: string) => number) =>
      'event' in d ? [d] : groupByShard(d.events, (e) => e.app_id, shard).map((events) => ({ ...d, events })),
  },
  webhook: {
    schema: z.preprocess(tagUntaggedWebhookJob, webhookJobSchema),
    jobId: (d: WebhookJob) => {
      switch (d.kind) {
        case 'first-attempts':
          return `we-${d.event_id}`;
        case 'first-attempts-safety-net':
          return `wb-${derivedId('webhook-first-attempts', ...d.events.map((e) => e.event_id).sort())}`;
        case 'deliver':
          return `wd-${d.delivery_id}-${d.run}`;
        case 'log-retention':
          return `wh-${d.kind}`;
      }
    },
    name: (d: WebhookJob) => d.kind,
    // First attempts fail on faults (database, Redis), not on receiver answers: plain
    // exponential retries. A delivery run may take the attempts its schedule has left after
    // `attempt_base`; its delays come from the worker's custom `webhook` backoff strategy.
    options: (d: WebhookJob, config: RetryConfig): JobsOptions => {
      switch (d.kind) {
        case 'first-attempts':
        case 'first-attempts-safety-net':
          return { attempts: 8, backoff: { type: 'exponential', delay: 500 } };
        case 'deliver':
          return { attempts: Math.max(1, config.WEBHOOK_RETRY_DELAYS_MS.length - d.attempt_base), backoff: { type: 'webhook' } };
        case 'log-retention':
          return { attempts: 5, backoff: { type: 'webhook' } };
      }
    },
    shardKey: (d: WebhookJob) =>
      d.kind === 'log-retention' ? undefined : d.kind === 'first-attempts-safety-net' ? d.events[0].app_id : d.app_id,
    splitByShard: (d: WebhookJob, shard: (key: string) => number) =>
      d.kind === 'first-attempts-safety-net' ? groupByShard(d.events, (e) => e.app_id, shard).map((events) => ({ ...d, events })) : [d],
  },
  send: {
    schema: sendJobSchema,
    jobId: (d: SendJob) => (d.kind === 'batch' ? `sendb-${d.batch_id}` : messageJobId(d.message_id)),
    name: (d: SendJob) => d.kind ?? 'message',
    // A batch job is retried for faults before its claim (database, Redis): its messages are
    // then taken up again, or handed to their own jobs.
    options: { attempts: 8, backoff: { type: 'exponential', delay: 1000 } },
    shardKey: (d: SendJob) => (d.kind === 'batch' ? d.messages[0].app_id : d.app_id),
    // Each part is a batch of its own: its id derives from the batch's and the shard's.
    splitByShard: (d: SendJob, shard: (key: string) => number) => {
      if (d.kind !== 'batch') return [d];
      const parts = groupByShard(d.messages, (m) => m.app_id, shard);
      if (parts.length === 1) return [d];
      return parts.map((messages) => ({
        ...d,
        messages,
        batch_id: derivedId('send-batch-shard', d.batch_id, String(shard(messages[0].app_id))),
      }));
    },
  },
  inbound: {
    schema: z.object({
      connection_id: uuid,
      // The connection's application, so the worker's lookups are by (app_id, id); absent in
      // jobs queued before it was carried.
      app_id: uuid.optional(),
      platform: z.string(),
      received_at: z.string(),
      headers: z.record(z.string(), z.string()),
      body: z.string(),
      dedupe_key: z.string(),
    }),
    jobId: (d: { connection_id: string; dedupe_key: string }) => `in-${d.connection_id}-${d.dedupe_key}`.replace(/:/g, '_'),
    options: { attempts: 10, backoff: { type: 'exponential', delay: 500 } },
    // The connection's application picks the shard; a job from before it was carried, its connection.
    shardKey: (d: { connection_id: string; app_id?: string }) => d.app_id ?? d.connection_id,
  },
  maintenance: {
    // Housekeeping on a schedule (workers/maintenance.ts): one task per job, each idempotent.
    schema: z.object({ task: z.enum(MAINTENANCE_TASKS) }),
    // One id per task: a run still queued absorbs the next trigger instead of piling up.
    jobId: (d: { task: string }) => `mt-${d.task}`,
    options: { attempts: 3, backoff: { type: 'exponential', delay: 60_000 } },
  },
  transcription: {
    schema: z.object({ app_id: uuid, event: ledgerEventSchema, file_id: uuid }),
    jobId: (d: { event: { id: string } }) => `tr-${d.event.id}`,
    // On its application's shard, beside the inbound job that adds it: a worker's follow-up
    // on the same master reaches the replica before that job's completion does (docs/SCALING.md §3).
    shardKey: (d: { app_id: string }) => d.app_id,
    options: { attempts: 5, backoff: { type: 'exponential', delay: 2000 } },
  },
} satisfies Record<QueueName, CatalogEntry>;

export type JobData<Q extends QueueName> = z.infer<(typeof JOBS)[Q]['schema']>;

/** BullMQ key prefix; per-test prefixes keep parallel test files apart. */
export const queuePrefix = (redisPrefix: string) => `${redisPrefix}:q`;

/** Redis Cluster's slot of a key without a hash tag: CRC16 (XMODEM) modulo 16,384. */
export function keySlot(key: string): number {
  let crc = 0;
  for (const byte of Buffer.from(key)) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}

const SLOTS = 16384;
/** Tag candidates: every string of one to three base-36 digits, shortest first, so the same tags come out everywhere. */
const firstTagOfSlot = (() => {
  let tags: Map<number, string> | undefined;
  return () => {
    if (tags) return tags;
    tags = new Map();
    for (let n = 0; n < 36 + 36 ** 2 + 36 ** 3; n++) {
      const len = n < 36 ? 1 : n < 36 + 36 ** 2 ? 2 : 3;
      const offset = len === 1 ? 0 : len === 2 ? 36 : 36 + 36 ** 2;
      const tag = (n - offset).toString(36).padStart(len, '0');
      const slot = keySlot(tag);
      if (!tags.has(slot)) tags.set(slot, tag);
    }
    return tags;
  };
})();

/**
 * The hash tags of `count` shards: shard i's is the shortest candidate whose slot is nearest
 * the middle of the i-th of `count` equal slot ranges, (i + ½)·16384/count. The slots are then
 * evenly spread, and each sits far from the range's edges, so a cluster of M masters whose
 * slots are split evenly (M dividing `count`) gets `count`/M shards on every master.
 * Deterministic: every process computes the same tags.
 */
export function shardTags(count: number): string[] {
  const bySlot = firstTagOfSlot();
  const used = new Set<string>();
  return Array.from({ length: count }, (_, i) => {
    const target = Math.round(((i + 0.5) * SLOTS) / count);
    for (let d = 0; d < SLOTS; d++) {
      for (const slot of [(target - d + SLOTS) % SLOTS, (target + d) % SLOTS]) {
        const tag = bySlot.get(slot);
        if (tag && !used.has(tag)) {
          used.add(tag);
          return tag;
        }
      }
    }
    throw new Error('no free shard tag');
  });
}

/** The shard of a key (an application id) among `count`: a stable hash, the same in every process and release. */
export function shardOf(key: string, count: number): number {
  if (count <= 1) return 0;
  return createHash('sha256').update(key).digest().readUInt32BE(0) % count;
}

/** Where one BullMQ queue of the catalog lives. */
export interface QueueShard {
  /** The catalog queue it belongs to. */
  queue: QueueName;
  /** Its BullMQ name: the catalog name when unsharded, else `ledger.2of4`. */
  name: string;
  prefix: string;
}

/**
 * Shard `index` of `count` of a catalog queue. With one shard (and for the unsharded queues) it
 * is today's queue, keys `${REDIS_PREFIX}:q:ledger:…`. A shard's prefix carries its own hash tag
 * and drops the braces of REDIS_PREFIX's tag (Redis hashes only a key's first tag), so its keys
 * (`gw:q:{5x}:ledger.2of4:…`) share one slot and each shard has its own. The `.` is what Bull
 * Board groups the shards of a queue by; the count in the name keeps two shard sets apart.
 */
export function queueShard(redisPrefix: string, queue: QueueName, count: number, index: number): QueueShard {
  if (count <= 1 || !(SHARDED_QUEUES as readonly string[]).includes(queue)) return { queue, name: queue, prefix: queuePrefix(redisPrefix) };
  const tag = shardTags(count)[index];
  return { queue, name: `${queue}.${index}of${count}`, prefix: `${queuePrefix(redisPrefix.replace(/[{}]/g, ''))}:{${tag}}` };
}

/** The BullMQ queues of one catalog queue under `count` shards (one for an unsharded queue). */
export function queueShards(redisPrefix: string, queue: QueueName, count: number): QueueShard[] {
  const n = (SHARDED_QUEUES as readonly string[]).includes(queue) ? count : 1;
  return Array.from({ length: n }, (_, i) => queueShard(redisPrefix, queue, n, i));
}

/** What the queues are built from. */
export type QueueConfig = Pick<Config, 'REDIS_PREFIX' | 'QUEUE_SHARDS' | 'QUEUE_SHARDS_PREVIOUS'>;

/** A BullMQ queue and the catalog queue it is (a shard of). */
export interface CatalogQueue {
  queue: QueueName;
  bull: Queue;
}

export interface Queues {
  /** The queues producers add to: per catalog queue, its QUEUE_SHARDS shards (by index). */
  readonly shards: { readonly [Q in QueueName]: readonly Queue[] };
  /** Every queue read by operators (dead letters, health, Bull Board): the shards, and those of QUEUE_SHARDS_PREVIOUS. */
  readonly all: readonly CatalogQueue[];
}

/**
 * The one rule of where a job goes: the queue of `name` whose shard `key` (the job's
 * application) picks; shard 0 without a key (jobs of no application, reads of an unsharded queue).
 */
export function queueFor(queues: Queues, name: QueueName, key?: string): Queue {
  const shards = queues.shards[name];
  return shards[key === undefined ? 0 : shardOf(key, shards.length)];
}

/**
 * The producer side of every queue, on one shared connection. A Queue re-emits its
 * connection's errors as its own `error` event, and BullMQ prints an unhandled one as a raw
 * stack trace (one per reconnect attempt during an outage): those are told once by the
 * connection's watch (src/redis.ts), anything else is logged. With `telemetry` (tracing on,
 * src/tracing/) each add is a producer span whose context rides in the job's options, where
 * the worker's consumer span picks it up (workers/host.ts).
 */
export function createQueues(connection: Redis, config: QueueConfig, logger: Logger, telemetry?: Telemetry): Queues {
  const build = ({ queue: name, name: bullName, prefix }: QueueShard): CatalogQueue => {
    const queue = new Queue(bullName, {
      connection,
      prefix,
      ...(telemetry ? { telemetry } : {}),
      defaultJobOptions: {
        ...staticOptions(JOBS[name]),
        removeOnComplete: { age: 3600, count: 10_000 },
        removeOnFail: { age: 7 * 24 * 3600 },
      },
    });
    queue.on('error', (err) => reportedByWatch(err) || logger.warn({ queue: bullName, err }, 'queue error'));
    return { queue: name, bull: queue };
  };
  const counts = [config.QUEUE_SHARDS, ...(config.QUEUE_SHARDS_PREVIOUS ? [config.QUEUE_SHARDS_PREVIOUS] : [])];
  const built = new Map<string, CatalogQueue>();
  for (const count of counts) {
    for (const name of QUEUE_NAMES)
      for (const shard of queueShards(config.REDIS_PREFIX, name, count)) {
        const key = `${shard.prefix}:${shard.name}`;
        if (!built.has(key)) built.set(key, build(shard));
      }
  }
  const current = (name: QueueName) =>
    queueShards(config.REDIS_PREFIX, name, config.QUEUE_SHARDS).map((s) => built.get(`${s.prefix}:${s.name}`)!.bull);
  return {
    shards: Object.fromEntries(QUEUE_NAMES.map((name) => [name, current(name)])) as unknown as Queues['shards'],
    all: [...built.values()],
  };
}

/** The queues of one catalog queue operators read: its shards, current and previous. */
export const catalogQueues = (queues: Queues, name: QueueName): Queue[] => queues.all.filter((q) => q.queue === name).map((q) => q.bull);

/** A queue's retry policy when it does not depend on the job (BullMQ's defaults for jobs added past the catalog). */
const staticOptions = (entry: CatalogEntry): JobsOptions => (typeof entry.options === 'function' ? {} : entry.options);

/** Queues whose retry policy reads the configuration: building their jobs takes it. */
type ConfiguredQueue = { [Q in QueueName]: (typeof JOBS)[Q]['options'] extends (...args: never[]) => JobsOptions ? Q : never }[QueueName];

/** Extra options of one job (a delay…), and the configuration when its queue's retry policy reads it. */
export type CatalogArgs<Q extends QueueName> = Q extends ConfiguredQueue
  ? [options: JobsOptions, config: RetryConfig]
  : [options?: JobsOptions];

/** The catalog's retry policy of one job. */
function retryOptions<Q extends QueueName>(name: Q, data: JobData<Q>, config?: RetryConfig): JobsOptions {
  const options = JOBS[name].options as CatalogEntry['options'];
  if (typeof options !== 'function') return options;
  if (!config) throw new Error(`${name} jobs need the configuration to build their retry policy`);
  return (options as (d: JobData<Q>, config: RetryConfig) => JobsOptions)(data, config);
}

/** A job of the catalog, validated and under its deterministic id, ready for `add` or `addBulk`. */
export function catalogJob<Q extends QueueName>(name: Q, data: JobData<Q>, ...args: CatalogArgs<Q>) {
  const [options = {}, config] = args as [JobsOptions?, RetryConfig?];
  const entry: CatalogEntry = JOBS[name];
  const parsed = entry.schema.parse(data) as JobData<Q>;
  const jobName = (entry.name as ((d: JobData<Q>) => string) | undefined)?.(parsed) ?? name;
  const jobId = (entry.jobId as (d: JobData<Q>) => string)(parsed);
  return { name: jobName, data: parsed, opts: { jobId, ...retryOptions(name, parsed, config), ...options } };
}

/**
 * While Redis is unreachable this throws the UNAVAILABLE AppError within REDIS_READY_WAIT_MS
 * instead of waiting for Redis (BullMQ would wait forever for a first connection that never comes).
 */
async function queueReady(queue: Queue): Promise<void> {
  const client = await withDeadline(queue.client, REDIS_READY_WAIT_MS, 'Redis');
  await redisReady(client as unknown as Parameters<typeof redisReady>[0]);
}

type CatalogJob<Q extends QueueName> = ReturnType<typeof catalogJob<Q>>;

/**
 * Each job with the queue it goes to: its application's shard. A batch of several
 * applications' items is split into one job per shard first (each under its own id).
 */
function routeJobs<Q extends QueueName>(queues: Queues, name: Q, jobs: CatalogJob<Q>[]): Map<Queue, CatalogJob<Q>[]> {
  const entry: CatalogEntry = JOBS[name];
  const count = queues.shards[name].length;
  const shard = (key: string) => shardOf(key, count);
  const routed = new Map<Queue, CatalogJob<Q>[]>();
  for (const job of jobs) {
    const parts = (count > 1 && entry.splitByShard ? entry.splitByShard(job.data as never, shard) : [job.data]) as JobData<Q>[];
    for (const data of parts) {
      const part =
        parts.length === 1 ? job : { ...job, data, opts: { ...job.opts, jobId: (entry.jobId as (d: JobData<Q>) => string)(data) } };
      const queue = queueFor(queues, name, entry.shardKey?.(data as never));
      routed.set(queue, [...(routed.get(queue) ?? []), part]);
    }
  }
  return routed;
}

/** Validates a payload against the catalog and enqueues it under its deterministic id, on its application's shard. */
export async function enqueue<Q extends QueueName>(queues: Queues, name: Q, data: JobData<Q>, ...args: CatalogArgs<Q>) {
  const [added] = await enqueueBulk(queues, name, [catalogJob(name, data, ...args)]);
  return added;
}

/**
 * Several catalog jobs of one queue in one Redis round trip per shard (a pipeline). Resolves
 * once Redis answered for every one of them (and, when the connection requires it, a replica
 * has them: one WAIT per shard, src/redis-durability.ts); rejects if any was not stored (those that were
 * are kept, and a retried `add` of them is a no-op under their deterministic ids).
 */
export async function enqueueBulk<Q extends QueueName>(queues: Queues, name: Q, jobs: CatalogJob<Q>[]) {
  const added = await Promise.all(
    [...routeJobs(queues, name, jobs)].map(async ([queue, batch]) => {
      await queueReady(queue);
      // A lone job skips the pipeline: building one binds every BullMQ script to it, which costs
      // more than the add itself (a quiet receiver's batches are mostly of one).
      const added = batch.length === 1 ? [await queue.add(batch[0].name, batch[0].data, batch[0].opts)] : await queue.addBulk(batch);
      await replicated(queue);
      return added;
    }),
  );
  return added.flat();
}

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.allSettled(queues.all.map((q) => q.bull.close()));
}

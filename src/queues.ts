import { Queue, type JobsOptions } from 'bullmq';
import { z } from 'zod';
import { QUEUE_NAMES, type Config, type QueueName } from './config.js';
import { derivedId } from './ids.js';
import { redisReady, REDIS_READY_WAIT_MS, withDeadline } from './availability.js';
import type { Logger } from './logger.js';
import { reportedByWatch, type Redis } from './redis.js';

export { QUEUE_NAMES, type QueueName };

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
});
export type LedgerEvent = z.infer<typeof ledgerEventSchema>;

const eventRef = z.object({ event_id: uuid, app_id: uuid });

/** The webhook queue's jobs, tagged by `kind` (also their BullMQ job name). */
const webhookJobSchema = z.discriminatedUnion('kind', [
  // The first attempts of every delivery of one event: one job per event, so a repeat of
  // the ledger job is dropped by its id.
  eventRef.extend({ kind: z.literal('first-attempts') }),
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
  },
  send: {
    schema: sendJobSchema,
    jobId: (d: SendJob) => (d.kind === 'batch' ? `sendb-${d.batch_id}` : messageJobId(d.message_id)),
    name: (d: SendJob) => d.kind ?? 'message',
    // A batch job is retried for faults before its claim (database, Redis): its messages are
    // then taken up again, or handed to their own jobs.
    options: { attempts: 8, backoff: { type: 'exponential', delay: 1000 } },
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
    options: { attempts: 5, backoff: { type: 'exponential', delay: 2000 } },
  },
} satisfies Record<QueueName, CatalogEntry>;

export type JobData<Q extends QueueName> = z.infer<(typeof JOBS)[Q]['schema']>;

/** BullMQ key prefix; per-test prefixes keep parallel test files apart. */
export const queuePrefix = (redisPrefix: string) => `${redisPrefix}:q`;

export type Queues = { [Q in QueueName]: Queue };

/**
 * The producer side of every queue, on one shared connection. A Queue re-emits its
 * connection's errors as its own `error` event, and BullMQ prints an unhandled one as a raw
 * stack trace (one per reconnect attempt during an outage): those are told once by the
 * connection's watch (src/redis.ts), anything else is logged.
 */
export function createQueues(connection: Redis, redisPrefix: string, logger: Logger): Queues {
  const prefix = queuePrefix(redisPrefix);
  const entries = QUEUE_NAMES.map((name) => {
    const queue = new Queue(name, {
      connection,
      prefix,
      defaultJobOptions: {
        ...staticOptions(JOBS[name]),
        removeOnComplete: { age: 3600, count: 10_000 },
        removeOnFail: { age: 7 * 24 * 3600 },
      },
    });
    queue.on('error', (err) => reportedByWatch(err) || logger.warn({ queue: name, err }, 'queue error'));
    return [name, queue];
  });
  return Object.fromEntries(entries) as Queues;
}

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

/** Validates a payload against the catalog and enqueues it under its deterministic id. */
export async function enqueue<Q extends QueueName>(queues: Queues, name: Q, data: JobData<Q>, ...args: CatalogArgs<Q>) {
  const job = catalogJob(name, data, ...args);
  await queueReady(queues[name]);
  return queues[name].add(job.name, job.data, job.opts);
}

/**
 * Several catalog jobs of one queue in one Redis round trip (a pipeline). Resolves once Redis
 * answered for every one of them; rejects if any was not stored (those that were are kept,
 * and a retried `add` of them is a no-op under their deterministic ids).
 */
export async function enqueueBulk<Q extends QueueName>(queues: Queues, name: Q, jobs: ReturnType<typeof catalogJob<Q>>[]) {
  await queueReady(queues[name]);
  // A lone job skips the pipeline: building one binds every BullMQ script to it, which costs
  // more than the add itself (a quiet receiver's batches are mostly of one).
  if (jobs.length === 1) return [await queues[name].add(jobs[0].name, jobs[0].data, jobs[0].opts)];
  return queues[name].addBulk(jobs);
}

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.allSettled(Object.values(queues).map((q) => q.close()));
}

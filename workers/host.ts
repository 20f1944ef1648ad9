import { DelayedError, UnrecoverableError, Worker, type Job, type WorkerOptions } from 'bullmq';
import type { Config, QueueName } from '../src/config.js';
import type { Deps } from '../src/deps.js';
import { describeItemFault, isPermanentItemFault } from '../src/errors.js';
import { JOBS, queueShards, type JobData, type QueueShard } from '../src/queues.js';
import { createRedis, reportedByWatch, watchConnection, type Redis } from '../src/redis.js';
import { createWorkerServices, type WorkerServices } from './services.js';

/** One queue's processor: how to build it from the dependencies and the process's services, and its worker options. */
export interface ProcessorDef<Q extends QueueName> {
  queue: Q;
  /**
   * The processor; `token` is the job's lock token, needed to move it to delayed. Its job's
   * data has already been re-parsed against the catalog (JOBS[queue].schema).
   */
  create(deps: Deps, services: WorkerServices): (job: Job<JobData<Q>>, token?: string) => Promise<unknown>;
  /** Extra BullMQ worker options (concurrency, backoff strategies, limiter). */
  options?(deps: Deps): Partial<WorkerOptions>;
}

/** The processor of some queue. */
export type AnyProcessorDef = { [Q in QueueName]: ProcessorDef<Q> }[QueueName];

export interface WorkerHost {
  workers: Worker[];
  /** Built once for every processor of the host; closed with it. */
  services: WorkerServices;
  /** Stops taking jobs, lets running ones finish (bounded by SHUTDOWN_TIMEOUT_MS), closes. */
  close(): Promise<void>;
}

/**
 * How often a job may lose its lock and be put back before BullMQ fails it for good. Every
 * job is idempotent, so one taken over is safe to run again, and an acknowledged one (a 202, an
 * inbound 200) exists nowhere else: failing it loses it. A worker loses its jobs' locks not
 * only when it dies but whenever it cannot reach Redis in time — on a starved machine while a
 * cluster fails over, workers reconnected for about a minute and six stalls (BullMQ's default
 * limit is one, ours was five) dead-lettered acknowledged inbound updates. Each stall takes at
 * least JOB_LOCK_MS + JOB_STALL_CHECK_MS (4.5 s by default), so 50 cover about four minutes of
 * that; a job that really kills every worker taking it still ends in the dead letter.
 */
export const STALLS_TOLERATED = 50;

/**
 * How a job's lock is kept and a dead worker's jobs are found (docs/OPERATIONS.md, "Job locks"):
 * the lock lasts JOB_LOCK_MS; every JOB_STALL_CHECK_MS one worker moves the active jobs whose
 * lock has lapsed back to waiting. A killed worker's jobs run again within about JOB_LOCK_MS +
 * JOB_STALL_CHECK_MS. The lock is renewed every quarter of JOB_LOCK_MS (BullMQ's default is
 * every half, checked every quarter): a live worker loses its jobs to another (run twice,
 * safely) only when its event loop is held for about three quarters of JOB_LOCK_MS, not half.
 */
export function jobLockOptions(config: Pick<Config, 'JOB_LOCK_MS' | 'JOB_STALL_CHECK_MS'>): Partial<WorkerOptions> {
  return {
    lockDuration: config.JOB_LOCK_MS,
    lockRenewTime: config.JOB_LOCK_MS / 4,
    stalledInterval: config.JOB_STALL_CHECK_MS,
    maxStalledCount: STALLS_TOLERATED,
  };
}

/**
 * Every shard of a queue: those of QUEUE_SHARDS, and while moving from another count, those of
 * QUEUE_SHARDS_PREVIOUS, until their jobs are done (docs/SCALING.md, "Queue shards").
 */
export function allShards(config: Pick<Config, 'REDIS_PREFIX' | 'QUEUE_SHARDS' | 'QUEUE_SHARDS_PREVIOUS'>, queue: QueueName): QueueShard[] {
  const counts = [config.QUEUE_SHARDS, ...(config.QUEUE_SHARDS_PREVIOUS ? [config.QUEUE_SHARDS_PREVIOUS] : [])];
  const shards = counts.flatMap((n) => queueShards(config.REDIS_PREFIX, queue, n));
  // Shard 0 of two counts may share its tag, and then is the same queue.
  return [...new Map(shards.map((s) => [`${s.prefix}:${s.name}`, s])).values()];
}

/**
 * Starts one BullMQ worker per shard each processor serves (`shardsOf`; every shard by
 * default); each re-parses its payload against the job catalog. The shards of one queue share
 * one processor (one group commit, one set of caches) and split its concurrency between them,
 * so a process runs as many jobs at once whatever QUEUE_SHARDS is.
 */
export function startWorkerHost(
  deps: Deps,
  defs: AnyProcessorDef[],
  shardsOf: (queue: QueueName) => QueueShard[] = (queue) => allShards(deps.config, queue),
): WorkerHost {
  const connection: Redis = watchConnection(createRedis(deps.config.redis, 'blocking'), 'workers', deps);
  const services = createWorkerServices(
    deps,
    defs.map((d) => d.queue),
  );
  let stopping = false;
  const startWorkers = <Q extends QueueName>(def: ProcessorDef<Q>): Worker[] => {
    const run = def.create(deps, services);
    const shards = shardsOf(def.queue);
    const options = { concurrency: deps.config.WORKER_CONCURRENCY, ...def.options?.(deps) };
    const concurrency = Math.max(1, Math.ceil((options.concurrency ?? 1) / shards.length));
    return shards.map((shard) => startWorker(def, run, shard, { ...options, concurrency }));
  };
  const startWorker = <Q extends QueueName>(
    def: ProcessorDef<Q>,
    run: ReturnType<ProcessorDef<Q>['create']>,
    shard: QueueShard,
    options: Partial<WorkerOptions>,
  ) => {
    const schema = JOBS[def.queue].schema;
    const worker = new Worker<JobData<Q>>(
      shard.name,
      async (job, token) => {
        // BullMQ can still hand over a job its blocking fetch was already waiting for when
        // close() began; a stopping worker puts it back untouched (no attempt spent) for
        // another worker instead of starting work it promised not to take.
        if (stopping && token) {
          await job.moveToDelayed(Date.now(), token);
          throw new DelayedError();
        }
        const parsed = schema.safeParse(job.data);
        if (!parsed.success) throw new UnrecoverableError(`invalid ${def.queue} payload: ${parsed.error.issues[0]?.message}`);
        job.data = parsed.data as JobData<Q>;
        try {
          return await run(job, token);
        } catch (err) {
          // Data the database can never accept: retrying only repeats the job's side effects
          // (a webhook re-sent each time); straight to the dead letter, where an operator sees it.
          if (isPermanentItemFault(err)) throw new UnrecoverableError(`refused for good: ${describeItemFault(err)}`);
          throw err;
        }
      },
      {
        connection,
        prefix: shard.prefix,
        ...jobLockOptions(deps.config),
        autorun: true,
        // Names the worker's blocking connection (`workers/ledger` in the outage log lines).
        name: def.queue,
        // Tracing on: each job runs in a consumer span, the child of the span that added it.
        ...(deps.tracing ? { telemetry: deps.tracing.bullmq } : {}),
        ...options,
      },
    );
    const observe = (job: Job | undefined, outcome: 'completed' | 'failed') => {
      if (job?.processedOn && job.finishedOn) {
        deps.metrics.jobDuration.observe({ queue: def.queue, outcome }, (job.finishedOn - job.processedOn) / 1000);
      }
    };
    worker.on('completed', (job) => observe(job, 'completed'));
    worker.on('failed', (job, err) => {
      observe(job, 'failed');
      deps.logger.warn({ queue: def.queue, jobId: job?.id, attempt: job?.attemptsMade, err: err?.message }, 'job failed');
    });
    // A connection's errors are told once by its watch (src/redis.ts), not once per reconnect attempt here.
    worker.on('error', (err) => reportedByWatch(err) || deps.logger.error({ queue: def.queue, err }, 'worker error'));
    return worker;
  };
  const workers: Worker[] = defs.flatMap((def) => startWorkers(def));
  deps.logger.info({ queues: workers.map((w) => w.name) }, 'workers started');

  return {
    workers,
    services,
    async close() {
      stopping = true;
      const timeoutMs = deps.config.SHUTDOWN_TIMEOUT_MS;
      const graceful = Promise.all(workers.map((w) => w.close()));
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        graceful.then(() => false),
        new Promise<boolean>((r) => (timer = setTimeout(() => r(true), timeoutMs))),
      ]);
      clearTimeout(timer);
      if (timedOut) {
        deps.logger.warn({ timeoutMs }, 'jobs still running at shutdown deadline: forcing close (they will be retried)');
        await Promise.all(workers.map((w) => w.close(true)));
      }
      await services.close();
      await connection.quit().catch(() => {});
    },
  };
}

import { setTimeout as delay } from 'node:timers/promises';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { poolUseOf, replicaLag, type ReadPools, type Sql } from './db.js';
import type { Queues } from './queues.js';
import { registerQueueHealth } from './queue-health.js';

/**
 * One registry per process (not prom-client's global), so tests can build several apps in one
 * process without metric name clashes.
 */
export interface Metrics {
  registry: Registry;
  httpDuration: Histogram<'method' | 'route' | 'status'>;
  jobDuration: Histogram<'queue' | 'outcome'>;
  ledgerBatchSize: Histogram<never>;
  streamClients: Gauge<never>;
  webhookAttempts: Counter<'outcome'>;
  /**
   * Adds queue gauges read from Redis at scrape time: jobs per state (failed = dead letters),
   * stuck jobs (active longer than `stuckAfterMs`) and the oldest waiting job's age.
   */
  watchQueues(queues: Queues, options: { stuckAfterMs: number }): void;
  /** Ledger progress in this process: `started` when its ledger worker starts, `committed` after each group commit. */
  ledgerProgress: { started(): void; committed(): void };
  /** Promise rejections nobody handled, caught by the last-resort handler (src/last-resort.ts). */
  unhandledRejections: Counter<never>;
  /** Outages of this process's connections, one per loss however long it lasts (src/connection-watch.ts). */
  connectionLosses: Counter<'kind' | 'name'>;
  /**
   * Read-only requests by where they were served (src/replica-reads.ts): `replica`, or the
   * primary because the application wrote moments ago (`written`), because the replica missed
   * a row or failed (`fallback`), or because it is resting after a failure (`resting`).
   */
  replicaReads: Counter<'served_by'>;
  /** Adds the pool gauges of `sql`: connections held by transactions, transactions waiting for one. */
  watchPool(sql: Sql): void;
  /**
   * Adds the read replica's lag (DATABASE_READ_URL), measured at scrape time: NaN while the
   * replica does not answer (`/readyz` then reports it down).
   */
  watchReplica(pools: ReadPools): void;
}

export function createMetrics(options: { defaults?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.defaults !== false) collectDefaultMetrics({ register: registry });
  const httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request duration by route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [registry],
  });
  const jobDuration = new Histogram({
    name: 'job_duration_seconds',
    help: 'Job processing duration by queue and outcome',
    labelNames: ['queue', 'outcome'] as const,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
    registers: [registry],
  });
  const ledgerBatchSize = new Histogram({
    name: 'ledger_batch_size',
    help: 'Events written per ledger group commit',
    buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500],
    registers: [registry],
  });
  const streamClients = new Gauge({ name: 'stream_clients', help: 'Open event-stream connections in this process', registers: [registry] });
  const webhookAttempts = new Counter({
    name: 'webhook_attempts_total',
    help: 'Outbound webhook delivery attempts by outcome',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  // Ledger progress: seconds since this process's ledger worker last committed (since it
  // started, before its first commit). No series in a process without a ledger worker.
  let ledgerStartedAt: number | undefined;
  let ledgerCommittedAt: number | undefined;
  new Gauge({
    name: 'ledger_last_commit_age_seconds',
    help: "Seconds since this process's ledger worker last committed a batch (since it started, before any)",
    registers: [registry],
    collect() {
      const since = ledgerCommittedAt ?? ledgerStartedAt;
      if (since !== undefined) this.set((Date.now() - since) / 1000);
    },
  });
  const ledgerProgress = {
    started: () => void (ledgerStartedAt ??= Date.now()),
    committed: () => void (ledgerCommittedAt = Date.now()),
  };
  const unhandledRejections = new Counter({
    name: 'process_unhandled_rejections_total',
    help: 'Promise rejections no code handled; logged and survived (each one is a bug to fix)',
    registers: [registry],
  });
  const connectionLosses = new Counter({
    name: 'connection_losses_total',
    help: 'Times a connection of this process to Redis or PostgreSQL was lost (kind, name as in its "connection lost" log line)',
    labelNames: ['kind', 'name'] as const,
    registers: [registry],
  });
  const replicaReads = new Counter({
    name: 'db_replica_reads_total',
    help: 'Read-only requests on a deployment with a read replica, by what served them (replica, written, fallback, resting)',
    labelNames: ['served_by'] as const,
    registers: [registry],
  });
  let watched = false;
  let poolWatched = false;
  let replicaWatched = false;
  return {
    watchReplica(pools) {
      if (replicaWatched || pools.readSql === pools.sql) return;
      replicaWatched = true;
      // One measurement per scrape serves both gauges.
      let measuring: Promise<{ seconds: number; bytes: number } | undefined> | undefined;
      const measure = () =>
        (measuring ??= Promise.race([replicaLag(pools), delay(2_000, undefined, { ref: false })])
          .catch(() => undefined)
          .finally(() => setImmediate(() => (measuring = undefined))));
      const gauge = (name: string, help: string, pick: (lag: { seconds: number; bytes: number }) => number) =>
        new Gauge({
          name,
          help,
          registers: [registry],
          async collect() {
            const lag = await measure();
            this.set(lag ? pick(lag) : NaN);
          },
        });
      gauge(
        'db_replica_lag_seconds',
        'Seconds the read replica is behind in replaying the primary (0 when it has replayed all it received)',
        (l) => l.seconds,
      );
      gauge('db_replica_lag_bytes', "Bytes of the primary's WAL the read replica has not replayed yet", (l) => l.bytes);
    },
    ledgerProgress,
    replicaReads,
    unhandledRejections,
    connectionLosses,
    watchPool(sql) {
      if (poolWatched) return;
      poolWatched = true;
      new Gauge({
        name: 'db_pool_reserved',
        help: 'Pool connections held by transactions in this process',
        registers: [registry],
        collect() {
          this.set(poolUseOf(sql).reserved);
        },
      });
      new Gauge({
        name: 'db_pool_waiting',
        help: 'Transactions waiting for a free pool connection in this process (each gives up after DB_ACQUIRE_TIMEOUT_MS)',
        registers: [registry],
        collect() {
          this.set(poolUseOf(sql).waiting);
        },
      });
    },
    registry,
    httpDuration,
    jobDuration,
    ledgerBatchSize,
    streamClients,
    webhookAttempts,
    watchQueues(queues, options) {
      if (watched) return;
      watched = true;
      registerQueueHealth(registry, queues, options.stuckAfterMs);
      new Gauge({
        name: 'queue_jobs',
        help: 'Jobs per queue and state (waiting, active, delayed, failed)',
        labelNames: ['queue', 'state'] as const,
        registers: [registry],
        async collect() {
          this.reset();
          await Promise.all(
            queues.all.map(async ({ bull }) => {
              const counts = await bull.getJobCounts('waiting', 'active', 'delayed', 'failed');
              for (const [state, n] of Object.entries(counts)) this.set({ queue: bull.name, state }, n);
            }),
          );
        },
      });
    },
  };
}

import type { Config } from './config.js';
import type { ChangeWatchers } from './change-feed.js';
import { createSecretBox, type SecretBox } from './crypto/secrets.js';
import { watchPool } from './connection-watch.js';
import { createSql, type ReadPools, type Sql } from './db.js';
import { targetingPrimary } from './db-primary.js';
import { createLogger, type Logger } from './logger.js';
import { createMetrics, type Metrics } from './metrics.js';
import { closeQueues, createQueues, type Queues } from './queues.js';
import { requireReplicas } from './redis-durability.js';
import { createRedis, watchConnection, type Redis } from './redis.js';
import type { Tracing } from './tracing/index.js';

/**
 * What the web process and the workers are built from. Passed in explicitly — no container,
 * no module singletons — so a test builds its own with its own database and key prefix.
 */
export interface Deps {
  config: Config;
  sql: Sql;
  /**
   * The pool readers use (src/db.ts `onReplica`): a streaming replica when DATABASE_READ_URL
   * is set, else `sql` itself. A replica lags, so reads that must see a commit go through the
   * ledger's rule (src/ledger/read.ts `readThrough`).
   */
  readSql: Sql;
  /**
   * Where reads that must see a commit go (src/ledger/read.ts): `sql` is always the primary,
   * `readSql` the pool this request may read from. In a read-only request's view
   * (src/replica-reads.ts) `sql` above is the reader and this still names the primary.
   */
  pools: ReadPools;
  /** Request-path Redis connection: fails fast so an outage answers 503 instead of hanging. */
  redis: Redis;
  /**
   * The connection BullMQ producers share. It fails fast like `redis`: an `add` while Redis is
   * down is refused (503 in a request, a retried job in a worker), never parked in a queue
   * that would apply it after the client was told it failed.
   */
  queueRedis: Redis;
  queues: Queues;
  logger: Logger;
  metrics: Metrics;
  secrets: SecretBox;
  /** Extra resources modules open lazily (subscribers, pools); closed first by closeDeps. */
  closers: (() => Promise<unknown>)[];
  /** This process's change-feed watchers (src/change-feed.ts), told of its own changes directly. */
  changeWatchers: ChangeWatchers;
  /** Tracing when OTEL_EXPORTER_OTLP_ENDPOINT is set (src/tracing/); undefined, nothing is traced. */
  tracing?: Tracing;
}

export function createDeps(
  config: Config,
  options: {
    logger?: Logger;
    metrics?: Metrics;
    dbPoolSize?: number /** Sets the statement timeout. @default 'worker' */;
    role?: 'web' | 'worker';
    /** Started before the connections are opened (startTracing); ended by closeDeps. */
    tracing?: Tracing;
  } = {},
): Deps {
  const logger = options.logger ?? createLogger(config.LOG_LEVEL);
  const metrics = options.metrics ?? createMetrics();
  const observer = { logger, metrics };
  const queueRedis = watchConnection(createRedis(config.redis, 'request'), 'queues', observer);
  // What a web process enqueues is acknowledged to a client (202, an inbound 200) at once.
  if (options.role === 'web') requireReplicas(queueRedis, config.REDIS_WAIT_REPLICAS);
  const poolOptions = {
    max: options.dbPoolSize ?? 10,
    acquireTimeoutMs: config.DB_ACQUIRE_TIMEOUT_MS,
    statementTimeoutMs: options.role === 'web' ? config.DB_STATEMENT_TIMEOUT_MS : config.DB_WORKER_STATEMENT_TIMEOUT_MS,
    idleInTransactionTimeoutMs: config.DB_IDLE_IN_TRANSACTION_TIMEOUT_MS,
  };
  const sql: Sql = createSql(targetingPrimary(config.DATABASE_URL), {
    ...poolOptions,
    onClose: watchPool('pool', observer, () => sql`SELECT 1`),
  });
  const readSql: Sql = config.DATABASE_READ_URL
    ? createSql(config.DATABASE_READ_URL, { ...poolOptions, onClose: watchPool('read-pool', observer, () => readSql`SELECT 1`) })
    : sql;
  return {
    config,
    sql,
    readSql,
    pools: { sql, readSql },
    redis: watchConnection(createRedis(config.redis, 'request'), 'requests', observer),
    queueRedis,
    queues: createQueues(queueRedis, config, logger, options.tracing?.bullmq),
    logger,
    metrics,
    secrets: createSecretBox(config.SECRETS_KEY),
    closers: [],
    changeWatchers: new Map(),
    tracing: options.tracing,
  };
}

/** Closes every connection; each step is attempted even if an earlier one fails. */
export async function closeDeps(deps: Deps): Promise<void> {
  await runAll(deps.logger, [
    ...deps.closers.splice(0),
    () => closeQueues(deps.queues),
    () => deps.sql.end({ timeout: 5 }),
    () => (deps.readSql === deps.sql ? Promise.resolve() : deps.readSql.end({ timeout: 5 })),
    () => deps.redis.quit(),
    () => deps.queueRedis.quit(),
    // Last: it flushes the spans of everything above.
    () => deps.tracing?.shutdown() ?? Promise.resolve(),
  ]);
}

export async function runAll(logger: Logger, steps: (() => Promise<unknown>)[]): Promise<void> {
  for (const step of steps) {
    try {
      await step();
    } catch (err) {
      logger.warn({ err }, 'shutdown step failed');
    }
  }
}

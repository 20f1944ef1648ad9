import postgres from 'postgres';
import { unavailable } from './errors.js';

export type Sql = postgres.Sql<Record<string, never>>;

export interface DbOptions {
  /** Pool size. @default 10 */
  max?: number;
  /**
   * Longest a transaction waits for a pool connection (ms); then UNAVAILABLE (503 with
   * Retry-After on the web) instead of a hang. @default 5000
   */
  acquireTimeoutMs?: number;
  /** The server cancels a statement running longer (ms; 0 = no limit). @default 0 */
  statementTimeoutMs?: number;
  /**
   * The server ends a session left idle inside a transaction this long (ms; 0 = never):
   * whatever path forgot to end a transaction, its connection and locks come back. @default 0
   */
  idleInTransactionTimeoutMs?: number;
  /** Called whenever one of the pool's connections closes (the outage watch, src/connection-watch.ts). */
  onClose?: () => void;
}

/** Pool connections held by transactions, and transactions waiting for one (the /metrics and /readyz gauges). */
export interface PoolUse {
  reserved: number;
  waiting: number;
}
const poolUse = new WeakMap<object, PoolUse>();
/** How many connections `sql`'s transactions hold and how many wait for one. */
export const poolUseOf = (sql: Sql): PoolUse => poolUse.get(sql) ?? { reserved: 0, waiting: 0 };

/**
 * Reconnect delay after a failed connect, in seconds: 50 ms doubling to 1 s. The driver's own
 * grows to 20 s, so after an outage the first request could wait that long for a server that
 * had been answering for seconds.
 */
const reconnectBackoff = (retries: number) => Math.min(0.05 * 2 ** retries, 1);

/**
 * `query` run as an unnamed statement: planned at each execution for its parameters and the
 * tables as they are then. A prepared statement's plan is kept by its connection once it has
 * run a few times; one kept from a table's first rows reads the whole table ever after, since
 * nothing replans it as the table grows until its statistics change (never, on a server without
 * autovacuum). For the hot statements that find rows of a fast-growing table by id; the price is
 * planning at each run, and a round trip unless every parameter is `typed` (the driver would
 * describe the statement first).
 */
export function freshlyPlanned<T extends readonly object[]>(query: postgres.PendingQuery<T>): postgres.PendingQuery<T> {
  (query as unknown as { options: { prepare?: boolean } }).options.prepare = false;
  return query;
}

/**
 * Parameters declared with their type. The driver describes a statement before running it
 * only to learn the types of parameters the server must infer (a plain string, number or
 * array): one whose parameters all carry a type is sent in one round trip (patches/). That
 * round trip comes at every run of a freshlyPlanned statement, so theirs are declared.
 */
export const typed = {
  uuid: (sql: Sql | Tx, value: string) => sql.typed(value, 2950),
  uuids: (sql: Sql | Tx, values: string[]) => sql.array(values, 2950),
  text: (sql: Sql | Tx, value: string) => sql.typed(value, 25),
  int: (sql: Sql | Tx, value: number) => sql.typed(value, 23),
};

/** One postgres.js pool per process; every query goes through it. */
export function createSql(url: string, options: DbOptions = {}): Sql {
  const sql = postgres(url, {
    max: options.max ?? 10,
    onnotice: () => {},
    // Seconds. A request waits at most this for a connection to an unreachable server, then
    // answers 503; the default (30 s) would outlast most clients' patience.
    connect_timeout: 5,
    // Seconds a plain query waits for a connection while every one is reserved (patches/):
    // the same bound as a transaction's, so neither can queue a request without end.
    queue_timeout: (options.acquireTimeoutMs ?? 5_000) / 1000,
    backoff: reconnectBackoff,
    onclose: options.onClose,
    // int8 comes back as a number: counts and sequence values stay well inside 2^53.
    types: {
      bigint: { to: 20, from: [20], serialize: (v: number | bigint) => String(v), parse: (v: string) => Number(v) },
    },
    connection: {
      application_name: 'messaging-gateway',
      statement_timeout: options.statementTimeoutMs ?? 0,
      idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs ?? 0,
    },
  }) as unknown as Sql;
  boundReserve(sql, options.acquireTimeoutMs ?? 5_000);
  return sql;
}

/**
 * `sql.reserve()` waits at most `ms` for a connection: the driver queues it without a bound,
 * so with every connection held (a lock, a slow server) a request would wait as long as they
 * are held. A connection that arrives after the caller gave up goes straight back.
 */
function boundReserve(sql: Sql, ms: number): void {
  const use: PoolUse = { reserved: 0, waiting: 0 };
  poolUse.set(sql, use);
  const reserve = sql.reserve.bind(sql);
  sql.reserve = () =>
    new Promise((resolve, reject) => {
      let gaveUp = false;
      use.waiting++;
      const timer = setTimeout(() => {
        gaveUp = true;
        use.waiting--;
        reject(unavailable('PostgreSQL (no pool connection free)'));
      }, ms);
      reserve().then(
        (tx) => {
          clearTimeout(timer);
          if (gaveUp) return tx.release();
          use.waiting--;
          resolve(tx);
        },
        (err) => {
          clearTimeout(timer);
          if (gaveUp) return;
          use.waiting--;
          reject(err);
        },
      );
    });
}

/** The connection a transaction runs on (see `transaction`). */
export type Tx = postgres.ReservedSql<Record<string, never>>;

/**
 * Codes by which postgres.js and PostgreSQL report that the session itself is gone
 * (closed socket, terminated backend, server shutting down): the server has already rolled
 * back whatever transaction that session had open. A write refused as read-only (25006) is
 * one too: the driver closes such a session (patches/), so the next goes to the primary.
 */
const SESSION_LOST = new Set([
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  '57P01',
  '57P02',
  '57P03',
  '25P03',
  '25006',
]);
const sessionLost = (err: unknown) => {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && (SESSION_LOST.has(code) || code.startsWith('08'));
};

/** Errors of a transaction whose session was lost before its COMMIT was sent: the server rolled it back. */
const rolledBack = new WeakSet<object>();

/**
 * Runs `fn` in a transaction on one reserved connection: BEGIN, COMMIT, ROLLBACK on failure.
 * Use it instead of `sql.begin`. postgres.js 3.4.x `begin` answers a connection that died
 * mid-transaction by writing ROLLBACK to it, which throws from a timer and takes the whole
 * process down (porsager/postgres#1154, #1208) — every worker at once when PostgreSQL
 * restarts under load. Here, when the session is gone, nothing more is written to it and it
 * is not handed back to the pool (the pool has already moved it to its closed connections).
 *
 * `againIfLost`: how many times to run `fn` again, on a new session, when its session was
 * lost before COMMIT was sent — the server rolled it back, so nothing of it is written. A
 * session lost during COMMIT is never retried: the transaction may have committed.
 */
export async function transaction<T>(sql: Sql, fn: (tx: Tx) => Promise<T>, options: { againIfLost?: number } = {}): Promise<T> {
  for (let left = options.againIfLost ?? 0; ; left--) {
    try {
      return await transactionOnce(sql, fn);
    } catch (err) {
      if (left > 0 && rolledBack.has(err as object)) continue;
      throw err;
    }
  }
}

async function transactionOnce<T>(sql: Sql, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const tx = (await sql.reserve()) as Tx;
  const use = poolUse.get(sql);
  if (use) use.reserved++;
  let release = true;
  let committing = false;
  try {
    await tx`BEGIN`;
    const result = await fn(tx);
    committing = true;
    await tx`COMMIT`;
    return result;
  } catch (err) {
    if (sessionLost(err)) {
      release = false;
      // A lost session's error is an object: `sessionLost` read its code.
      if (!committing) rolledBack.add(err as object);
    } else await tx`ROLLBACK`.catch((e: unknown) => void (release = !sessionLost(e)));
    throw err;
  } finally {
    if (use) use.reserved--;
    if (release) tx.release();
  }
}

/**
 * The pools a reader chooses between: `readSql` is the streaming replica DATABASE_READ_URL
 * names, or `sql` itself when there is none (then every read below is a plain primary read).
 */
export interface ReadPools {
  sql: Sql;
  readSql: Sql;
}

/**
 * After the replica failed to answer, reads skip it this long (ms): a replica that is gone
 * would otherwise cost every read a connect timeout before its fallback.
 */
const REPLICA_REST_MS = 5_000;
const replicaRestingUntil = new WeakMap<Sql, number>();

/**
 * Runs `read` on the replica, or on the primary when the replica fails (unreachable, or a
 * query cancelled by a recovery conflict) or failed moments ago: the service reads on without
 * its replica.
 */
export async function onReplica<T>(pools: ReadPools, read: (sql: Sql) => Promise<T>): Promise<T> {
  const { sql, readSql } = pools;
  if (readSql === sql || replicaResting(readSql)) return read(sql);
  try {
    return await read(readSql);
  } catch {
    restReplica(readSql);
    return read(sql);
  }
}

/** Whether reads should skip the replica `readSql` for now: it failed to answer moments ago. */
export const replicaResting = (readSql: Sql): boolean => (replicaRestingUntil.get(readSql) ?? 0) > Date.now();
/** Records that the replica `readSql` failed to answer: reads skip it for a while (REPLICA_REST_MS). */
export const restReplica = (readSql: Sql): void => void replicaRestingUntil.set(readSql, Date.now() + REPLICA_REST_MS);

/**
 * A by-id read on the replica, and on the primary when the replica has no such row: it may be
 * one the primary committed moments ago (a 201 just answered) that the replica has not replayed.
 */
export async function findOnReplica<T>(pools: ReadPools, read: (sql: Sql) => Promise<T | undefined>): Promise<T | undefined> {
  const found = await onReplica(pools, read);
  return found === undefined && pools.readSql !== pools.sql ? read(pools.sql) : found;
}

/** How far the replica is behind: seconds of replay, and bytes of WAL the primary wrote that it has not replayed. */
export async function replicaLag(pools: ReadPools): Promise<{ seconds: number; bytes: number }> {
  // Seconds since the last transaction replayed, unless it has replayed all it received: an
  // idle primary sends nothing, and the replica is then not behind however old that is.
  const [[replica], [primary]] = await Promise.all([
    pools.readSql<{ seconds: number | null; replayed: string | null }[]>`
      SELECT CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
                  ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 END AS seconds,
             pg_last_wal_replay_lsn()::text AS replayed`,
    pools.sql<{ lsn: string }[]>`SELECT pg_current_wal_lsn()::text AS lsn`,
  ]);
  if (replica.replayed === null) throw new Error('DATABASE_READ_URL is not a streaming replica (it replays no WAL)');
  const [{ bytes }] = await pools.sql<{ bytes: number }[]>`
    SELECT greatest(pg_wal_lsn_diff(${primary.lsn}::pg_lsn, ${replica.replayed}::pg_lsn), 0)::float8 AS bytes`;
  return { seconds: Math.max(replica.seconds ?? 0, 0), bytes };
}

import postgres from 'postgres';

export type Sql = postgres.Sql<Record<string, never>>;

export interface DbOptions {
  /** Pool size. @default 10 */
  max?: number;
}

/** One postgres.js pool per process; every query goes through it. */
export function createSql(url: string, options: DbOptions = {}): Sql {
  return postgres(url, {
    max: options.max ?? 10,
    onnotice: () => {},
    // Seconds. A request waits at most this for a connection to an unreachable server, then
    // answers 503; the default (30 s) would outlast most clients' patience.
    connect_timeout: 5,
    // int8 comes back as a number: counts and sequence values stay well inside 2^53.
    types: {
      bigint: { to: 20, from: [20], serialize: (v: number | bigint) => String(v), parse: (v: string) => Number(v) },
    },
    connection: { application_name: 'messaging-gateway' },
  }) as unknown as Sql;
}

/** The connection a transaction runs on (see `transaction`). */
export type Tx = postgres.ReservedSql<Record<string, never>>;
/** What `transaction` hands its function; kept as the name modules already use. */
export type TransactionSql = Tx;

/**
 * Codes by which postgres.js and PostgreSQL report that the session itself is gone
 * (closed socket, terminated backend, server shutting down): the server has already rolled
 * back whatever transaction that session had open.
 */
const SESSION_LOST = new Set(['CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', '57P01', '57P02', '57P03']);
const sessionLost = (err: unknown) => {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && (SESSION_LOST.has(code) || code.startsWith('08'));
};

/**
 * Runs `fn` in a transaction on one reserved connection: BEGIN, COMMIT, ROLLBACK on failure.
 * Use it instead of `sql.begin`. postgres.js 3.4.x `begin` answers a connection that died
 * mid-transaction by writing ROLLBACK to it, which throws from a timer and takes the whole
 * process down (porsager/postgres#1154, #1208) — every worker at once when PostgreSQL
 * restarts under load. Here, when the session is gone, nothing more is written to it and it
 * is not handed back to the pool (the pool has already moved it to its closed connections).
 */
export async function transaction<T>(sql: Sql, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const tx = (await sql.reserve()) as Tx;
  let release = true;
  try {
    await tx`BEGIN`;
    const result = await fn(tx);
    await tx`COMMIT`;
    return result;
  } catch (err) {
    if (sessionLost(err)) release = false;
    else await tx`ROLLBACK`.catch((e: unknown) => void (release = !sessionLost(e)));
    throw err;
  } finally {
    if (release) tx.release();
  }
}

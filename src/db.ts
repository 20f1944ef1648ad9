import postgres from 'postgres';

export type Sql = postgres.Sql<Record<string, never>>;
export type TransactionSql = postgres.TransactionSql<Record<string, never>>;

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

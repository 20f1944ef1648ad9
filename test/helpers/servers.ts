/**
 * The PostgreSQL and Redis servers the suite shares with whatever else runs on the machine:
 * DATABASE_URL's and REDIS_URL's when set, else the local defaults. Each test file still gets
 * its own database on that server (db.ts) and its own Redis key prefix (stack.ts). Servers a
 * test starts for itself (postgres-server.ts, redis-server.ts) are not these.
 */
const pg = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');

/** A database of the shared PostgreSQL server, with DATABASE_URL's user, password and parameters. */
export function pgDatabaseUrl(name: string): string {
  const url = new URL(pg);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Where the shared PostgreSQL listens, for the relays and proxies tests put in front of it. */
export const PG_HOST = pg.hostname.replace(/^\[(.*)\]$/, '$1');
export const PG_PORT = Number(pg.port || 5432);

/** The shared Redis, database number included. */
export const SHARED_REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/0';

/** The machine's NATS with JetStream; a test's streams there are `gwtest_…` on `gwtest.….>` subjects, deleted after. */
export const SHARED_NATS_URL = 'nats://127.0.0.1:4222';

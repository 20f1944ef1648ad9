import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { runner } from 'node-pg-migrate';
import postgres from 'postgres';
import { loadConfig } from './config.js';
import { primaryUrl } from './db-primary.js';
import { projectRoot } from './project-root.js';

/**
 * Creates the database named in the URL when it does not exist yet (first run on a fresh
 * machine), on the primary when the URL names several servers.
 */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(await primaryUrl(databaseUrl));
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!name) return;
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const sql = postgres(admin.toString(), { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql`SELECT 1 AS x FROM pg_database WHERE datname = ${name}`;
    if (!row) {
      try {
        await sql.unsafe(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
      } catch (err) {
        // Two processes racing to create it: the loser sees duplicate_database and carries on.
        if ((err as { code?: string }).code !== '42P04' && (err as { code?: string }).code !== '23505') throw err;
      }
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * Applies pending SQL migrations. Safe to run twice (applied ones are recorded) and from two
 * processes at once (node-pg-migrate holds an advisory lock; the second waits for the first).
 * A URL naming several servers is served by the one that is primary when it starts.
 */
export async function migrate(databaseUrl: string, log: (msg: string) => void = () => {}): Promise<void> {
  const primary = await primaryUrl(databaseUrl);
  await ensureDatabase(primary);
  await runner({
    databaseUrl: primary,
    dir: join(projectRoot(), 'migrations'),
    direction: 'up',
    migrationsTable: 'pgmigrations',
    singleTransaction: true,
    advisoryLockMode: 'wait',
    checkOrder: true,
    log,
    logger: { debug: () => {}, info: log, warn: log, error: log },
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const config = loadConfig();
  migrate(config.DATABASE_URL, (m) => process.stdout.write(`${m}\n`)).then(
    () => process.exit(0),
    (err) => {
      process.stderr.write(`migrate failed: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}

import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { runner } from 'node-pg-migrate';
import { ensureDatabase } from '../../src/migrate.js';
import { projectRoot } from '../../src/project-root.js';
import { TEST_DB_PREFIX, dbUrl, dropDatabase } from './db.js';

/**
 * A fresh database migrated up to just before `migration` (a file name without `.sql`): the
 * schema a deployment had when that migration first ran on it. `drop` removes it.
 */
export async function databaseBefore(migration: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${TEST_DB_PREFIX}m${randomBytes(5).toString('hex')}`;
  const url = dbUrl(name);
  const count = readdirSync(join(projectRoot(), 'migrations')).filter((f) => f.endsWith('.sql') && f < `${migration}.sql`).length;
  await ensureDatabase(url);
  await runner({
    databaseUrl: url,
    dir: join(projectRoot(), 'migrations'),
    direction: 'up',
    migrationsTable: 'pgmigrations',
    count,
    log: () => {},
  });
  return {
    url,
    drop: () => dropDatabase(name),
  };
}

import { createHash, randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { pgDatabaseUrl } from './servers.js';

/** The maintenance database of the shared server: where test databases are created and dropped. */
export const ADMIN_URL = pgDatabaseUrl('postgres');
/**
 * Names carry a hash of the checkout so that several checkouts on one machine (worktrees, a CI
 * clone) can run their suites at the same time without dropping each other's databases.
 */
const CHECKOUT_TAG = createHash('sha256').update(process.cwd()).digest('hex').slice(0, 8);
export const TEMPLATE_DB = `gw_tpl_${CHECKOUT_TAG}`;
export const TEST_DB_PREFIX = `gw_t_${CHECKOUT_TAG}_`;
export const dbUrl = pgDatabaseUrl;

/** A fresh database cloned from the migrated template: each test file gets its own. */
export async function createTestDatabase(): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const name = `${TEST_DB_PREFIX}${randomBytes(6).toString('hex')}`;
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.unsafe(`CREATE DATABASE ${name} TEMPLATE ${TEMPLATE_DB}`);
        break;
      } catch (err) {
        // Another file cloning the template at the same instant: try again shortly.
        if (attempt > 20 || !/being accessed by other users/.test(String((err as Error).message))) throw err;
        await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
      }
    }
  } finally {
    await admin.end();
  }
  return {
    name,
    url: dbUrl(name),
    drop: () => dropDatabase(name),
  };
}

/** Removes a test database, ending its sessions; one already gone is no error. */
export async function dropDatabase(name: string): Promise<void> {
  const a = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await a.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
  await a.end();
}

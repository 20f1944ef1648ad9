import postgres from 'postgres';
import { migrate } from '../../src/migrate.js';
import { ADMIN_URL, TEMPLATE_DB, TEST_DB_PREFIX, dbUrl } from './db.js';

/** Builds a migrated template database once per run; each test file clones it. */
export default async function setup(): Promise<() => Promise<void>> {
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`DROP DATABASE IF EXISTS ${TEMPLATE_DB} WITH (FORCE)`);
  await admin.end();
  await migrate(dbUrl(TEMPLATE_DB));
  return async () => {
    const a = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
    // Databases this checkout's crashed runs left behind are swept too (other checkouts' are theirs).
    const stale = await a<{ datname: string }[]>`SELECT datname FROM pg_database WHERE starts_with(datname, ${TEST_DB_PREFIX})`;
    for (const { datname } of stale) await a.unsafe(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`).catch(() => {});
    await a.end();
  };
}

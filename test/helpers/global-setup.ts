import postgres from 'postgres';
import { migrate } from '../../src/migrate.js';
import { ADMIN_URL, TEMPLATE_DB, dbUrl } from './db.js';

/** Builds a migrated template database once per run; each test file clones it. */
export default async function setup(): Promise<() => Promise<void>> {
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`DROP DATABASE IF EXISTS ${TEMPLATE_DB} WITH (FORCE)`);
  await admin.end();
  await migrate(dbUrl(TEMPLATE_DB));
  return async () => {
    const a = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
    // Databases left by crashed runs of earlier days are swept too.
    const stale = await a<{ datname: string }[]>`SELECT datname FROM pg_database WHERE datname LIKE 'gw_t_%'`;
    for (const { datname } of stale) await a.unsafe(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`).catch(() => {});
    await a.end();
  };
}

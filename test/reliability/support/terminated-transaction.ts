/**
 * Child process for db-transaction.test.ts: runs a transaction whose backend is terminated
 * mid-query, with `sql.begin` or with our `transaction`, then checks the pool still works.
 * Prints what happened; a driver crash shows as the process dying.
 */
import postgres from 'postgres';
import { createSql, transaction, type Sql } from '../../../src/db.js';

const [mode, url] = process.argv.slice(2);
const sql: Sql = createSql(url, { max: 2 });
const admin = postgres(url, { max: 1, onnotice: () => {} });

const body = async (tx: Sql) => {
  const [{ pid }] = await tx<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
  setTimeout(() => void admin`SELECT pg_terminate_backend(${pid})`.execute(), 200);
  await tx`SELECT pg_sleep(3)`;
};
try {
  await (mode === 'begin' ? sql.begin((tx) => body(tx as unknown as Sql)) : transaction(sql, (tx) => body(tx as unknown as Sql)));
  process.stdout.write('committed\n');
} catch (err) {
  process.stdout.write(`rejected ${(err as { code?: string }).code}\n`);
}
// Let any timer the driver scheduled fire, then use the pool again.
await new Promise((r) => setTimeout(r, 500));
const [{ one }] = await sql<{ one: number }[]>`SELECT 1 AS one`;
process.stdout.write(`pool ok ${one}\n`);
await transaction(sql, async (tx) => tx`SELECT 2`);
process.stdout.write('transaction ok\n');
await sql.end({ timeout: 1 });
await admin.end();

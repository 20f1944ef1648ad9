/**
 * Child process for postgres-driver.test.ts: the connection is reset while postgres.js runs
 * its per-connection type query. Node's default for an unhandled rejection is to exit 1, so
 * this process exits 0 only if the driver handled the failure. Prints how each call settled.
 */
import { createSql, transaction } from '../../../src/db.js';
import { startPgProxy } from './pg-proxy.js';

const [mode, upstream] = process.argv.slice(2);
const proxy = await startPgProxy();
const sql = createSql(proxy.url(upstream), { max: 1 });
const cut = proxy.cutOnQuery('b.typarray');
const call = mode === 'reserve' ? transaction(sql, async (tx) => tx`SELECT 1 AS x`) : sql`SELECT 1 AS x`;
const settled = await Promise.race([
  call.then(
    () => 'resolved',
    (e: { code?: string }) => `rejected ${e.code}`,
  ),
  new Promise((r) => setTimeout(() => r('pending'), 5_000)),
]);
await cut;
process.stdout.write(`first ${settled}\n`);
const [{ x }] = await sql<{ x: number }[]>`SELECT 2 AS x`;
process.stdout.write(`then ${x}\n`);
// Let any rejection the driver left unhandled surface before exiting.
await new Promise((r) => setTimeout(r, 200));
await sql.end({ timeout: 1 });
await proxy.close();

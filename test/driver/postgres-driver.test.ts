import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createSql, freshlyPlanned, type Sql } from '../../src/db.js';
import { projectRoot } from '../../src/project-root.js';
import { createTestEnv, type TestEnv } from '../helpers/stack.js';
import { startPgProxy, type PgProxy } from './support/pg-proxy.js';
import { settlement } from './support/settlement.js';

/**
 * postgres.js 3.4.9 failure modes the project patches (patches/postgres+3.4.9.patch), each
 * driven to its exact protocol moment through a proxy on loopback in front of this file's
 * own database.
 */
let t: TestEnv;
let proxy: PgProxy;
let sql: Sql;
beforeAll(async () => {
  t = await createTestEnv();
});
afterEach(async () => {
  await sql?.end({ timeout: 1 });
  await proxy?.close();
});
afterAll(async () => {
  await t.dropDatabase();
});

async function throughProxy(max: number) {
  proxy = await startPgProxy();
  sql = createSql(proxy.url(t.env.DATABASE_URL), { max });
  await sql`SELECT 1`;
}

/** A reserve() waiting for the pool's only connection while that connection is cut. */
async function reserveQueuedBehindCut(refuseReconnects: number) {
  const holder = await sql.reserve();
  const waiter = sql.reserve();
  // The waiter is queued once reserve() has run its synchronous part; give it a turn.
  await new Promise((r) => setImmediate(r));
  proxy.refuseStartups(refuseReconnects);
  proxy.cutAll();
  await expect(holder`SELECT 1`).rejects.toMatchObject({ code: expect.stringMatching(/CONNECTION_CLOSED|ECONNRESET/) });
  // Wrapped: an async function returning the promise itself would wait for it.
  return { waiter };
}

describe('postgres.js under connection faults', () => {
  it('settles a queued reserve() when the connection it waits for is cut and reconnects (porsager/postgres#1195)', async () => {
    await throughProxy(1);
    const { waiter } = await reserveQueuedBehindCut(0);
    expect(await settlement(waiter, 5_000)).toBe('resolved');
    const tx = await waiter;
    expect(await tx`SELECT 3 AS x`).toEqual([{ x: 3 }]);
    tx.release();
    expect(await sql`SELECT 4 AS x`).toEqual([{ x: 4 }]);
  });

  it('settles a queued reserve() whose reconnect first meets FATAL 57P03, and loses no pool slot', async () => {
    await throughProxy(1);
    const { waiter } = await reserveQueuedBehindCut(1);
    const outcome = await settlement(waiter, 5_000);
    expect(outcome).toMatch(/^(resolved|rejected 57P03)$/);
    if (outcome === 'resolved') (await waiter).release();
    // The pool's one connection is usable again, by a reservation as well as a plain query.
    const again = await settlement(
      sql.reserve().then((tx) => tx.release()),
      5_000,
    );
    expect(again).toBe('resolved');
    expect(await sql`SELECT 5 AS x`).toEqual([{ x: 5 }]);
  });

  it('settles a cold reserve() whose first start-up meets FATAL 57P03, then serves the next one', async () => {
    proxy = await startPgProxy();
    sql = createSql(proxy.url(t.env.DATABASE_URL), { max: 1 });
    proxy.refuseStartups(1);
    expect(await settlement(sql.reserve(), 5_000)).toBe('rejected 57P03');
    expect(
      await settlement(
        sql.reserve().then((tx) => tx.release()),
        5_000,
      ),
    ).toBe('resolved');
    expect(await sql`SELECT 6 AS x`).toEqual([{ x: 6 }]);
  });

  it('settles the statements queued on a reserved connection when that connection is cut', async () => {
    await throughProxy(1);
    const tx = await sql.reserve();
    // A statement with parameters not yet prepared on this session is described first, and
    // until its answer arrives the reservation queues the statements sent after it (as
    // writeEvents sends its ledger_heads INSERT and then its UPDATE). The session is cut while
    // the first is in flight: every statement of the reservation must settle, not only it.
    const cut = proxy.cutOnQuery('strand_probe');
    // settlement() starts each one (a postgres.js query is sent once something awaits it).
    const outcomes = Promise.all(
      [tx`SELECT ${1}::int AS strand_probe`, tx`SELECT 2 AS x`, tx`SELECT 3 AS x`].map((q) => settlement(q, 5_000)),
    );
    await cut;
    const lost = expect.stringMatching(/^rejected (CONNECTION_CLOSED|ECONNRESET)$/);
    // Before the fix the two queued statements stayed 'pending' for ever, and so did a
    // transaction() awaiting them (the ledger's group commit, which then stalled every job).
    expect(await outcomes).toEqual([lost, lost, lost]);
    tx.release();
    expect(await sql`SELECT 8 AS x`).toEqual([{ x: 8 }]);
  });

  it("fails a query handed to a connection between its socket's error and close, and the next session serves", async () => {
    await throughProxy(1);
    const cut = proxy.cutOnQuery('carry_probe');
    const first = sql`SELECT 1 AS carry_probe`;
    // Issued when the reset fails the first query, before the socket's 'close': the pool's one
    // connection still counts as busy and takes it. It was kept for the next session, which
    // never received it and waited for its answer for ever, and the connection with it.
    const second = first.catch(() => sql`SELECT 2 AS x`);
    const outcomes = Promise.all([settlement(first, 5_000), settlement(second, 5_000)]);
    await cut;
    const lost = expect.stringMatching(/^rejected (CONNECTION_CLOSED|ECONNRESET)$/);
    expect(await outcomes).toEqual([lost, expect.stringMatching(/^(resolved|rejected (CONNECTION_CLOSED|ECONNRESET))$/)]);
    expect(await settlement(sql`SELECT 3 AS x`, 5_000)).toBe('resolved');
    expect(await settlement(sql`SELECT 4 AS x`, 5_000)).toBe('resolved');
  });

  it('runs a statement whose parameters all have known types in one round trip, without describing it first', async () => {
    await throughProxy(1);
    // The driver describes a statement first (Parse, Describe, Flush, then wait) only to learn
    // the types of its parameters; the Flush marks each such extra round trip.
    const describedFirst = () => proxy.sent('H');
    const id = '6f1c3c1e-8d6b-4a53-9d0e-3c1f2a4b5c6d';
    const known = () => sql<{ id: string; n: number; names: string[]; nothing: null }[]>`
      SELECT ${sql.typed(id, 2950)} AS id, ${sql.typed(5, 23)} + 1 AS n, ${sql.array(['a', 'b'], 25)} AS names, ${null}::text AS nothing`;
    const expected = [{ id, n: 6, names: ['a', 'b'], nothing: null }];
    // Unnamed (planned at each run), then prepared: its first run and a later one.
    expect(await freshlyPlanned(known())).toEqual(expected);
    expect(await known()).toEqual(expected);
    expect(await known()).toEqual(expected);
    expect(describedFirst()).toBe(0);
    // A parameter left to the server to infer (a JavaScript string) is still described first.
    expect(await freshlyPlanned(sql`SELECT ${'x'}::text AS x`)).toEqual([{ x: 'x' }]);
    expect(describedFirst()).toBe(1);
  });

  it("builds a new pool's first statement with the array types its connection just fetched", async () => {
    // A connection fetches the server's array types before its first statement, and ran that
    // statement in the same turn the answer arrived, before the types were registered: a typed
    // array parameter was then declared as its element type (uuid, not uuid[]). A reserved
    // connection is handed over later, after the registration: checked as the other way in.
    for (const first of ['plain', 'reserved'] as const) {
      const fresh = createSql(t.env.DATABASE_URL, { max: 1 });
      try {
        const id = '6f1c3c1e-8d6b-4a53-9d0e-3c1f2a4b5c6d';
        const run = (q: Sql) => q<{ id: string }[]>`SELECT unnest(${q.array([id], 2950)}) AS id`;
        if (first === 'plain') expect(await run(fresh)).toEqual([{ id }]);
        else {
          const tx = await fresh.reserve();
          try {
            expect(await run(tx as unknown as Sql)).toEqual([{ id }]);
          } finally {
            tx.release();
          }
        }
      } finally {
        await fresh.end({ timeout: 1 });
      }
    }
  });

  it('starts the next result at row 0 after an error arrived mid-result (porsager/postgres#1181)', async () => {
    await throughProxy(1);
    // Rows 1 and 2 reach the client before the division by zero on row 3.
    await expect(sql`SELECT CASE WHEN i < 3 THEN i ELSE 1 / (i - i) END AS v FROM generate_series(1, 5) i`).rejects.toMatchObject({
      code: '22012',
    });
    const rows = await sql<{ x: number }[]>`SELECT 7 AS x`;
    expect(rows.length).toBe(1);
    expect([...rows]).toEqual([{ x: 7 }]);
  });

  for (const mode of ['query', 'reserve'] as const) {
    it(`does not crash the process when the connection resets during its type query (${mode}; #1192, #1205, #1223)`, {
      timeout: 20_000,
    }, async () => {
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', join(projectRoot(), 'test/driver/support/type-query-reset.ts'), mode, t.env.DATABASE_URL],
        {
          cwd: projectRoot(),
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      expect(out).toMatch(/first (resolved|rejected ECONNRESET)\n/);
      expect(out).toMatch(/then 2\n/);
      expect(code).toBe(0);
    });
  }
});

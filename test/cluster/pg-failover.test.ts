import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { SCOPES } from '../../src/auth/scopes.js';
import { createSql, transaction } from '../../src/db.js';
import { isUnavailable } from '../../src/errors.js';
import { migrate } from '../../src/migrate.js';
import { startReplicatedPostgres, type ReplicatedPostgres } from '../helpers/postgres-replicated.js';
import { createTestEnv, freePort, spawnService, type ChildService, type TestEnv } from '../helpers/stack.js';
import { apiFetch } from '../helpers/openapi-contract.js';

/**
 * The service as separate web and worker processes on a primary with a synchronous standby,
 * given a DATABASE_URL that lists both (the standby first) and says nothing of which to use,
 * as an operator may set it. The primary is SIGKILLed under a stream of writes and the standby
 * promoted, as an orchestrator would: the pools find the new primary themselves, nothing
 * acknowledged is lost or doubled, and nothing is answered 500.
 */
let pg: ReplicatedPostgres;
let t: TestEnv;
const procs: ChildService[] = [];
const DB = 'gw_failover';
/** Between the kill and the promotion, as an orchestrator's failure detection takes. */
const DETECTION_MS = 12_000;
/** POST /v1/events answers 202 after this long without the ledger's commit (EVENT_WAIT_MS). */
const EVENT_WAIT_MS = 3000;
beforeAll(async () => {
  [pg, t] = await Promise.all([startReplicatedPostgres(), createTestEnv({ LOG_LEVEL: 'info' })]);
  await migrate(pg.url(DB));
}, 120_000);
afterAll(async () => {
  for (const p of procs) p.kill('SIGKILL');
  await Promise.all(procs.map((p) => p.exited));
  await t?.dropDatabase();
  await pg?.destroy();
});

const start = (entry: string, env: Record<string, string>) => {
  const p = spawnService(entry, env);
  procs.push(p);
  return p;
};

interface Acked {
  n: number;
  id: string;
  status: number;
}

describe('a session on a read-only server', () => {
  it('a write refused as read-only (25006) is UNAVAILABLE and closes its session, so the next one is writable', async () => {
    const sql = createSql(pg.url(DB), { max: 1 });
    try {
      const readOnly = async () => {
        // The session turned read-only as a fenced old primary's or a standby's is.
        await sql`SET default_transaction_read_only = on`;
        const [{ pid }] = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
        return pid;
      };
      const write = (q: typeof sql) => q`CREATE TABLE IF NOT EXISTS read_only_probe (n int)`;

      const plainPid = await readOnly();
      const plain = await write(sql).catch((err: unknown) => err);
      expect(plain).toMatchObject({ code: '25006' });
      expect(isUnavailable(plain)).toBe(true);
      const [after] = await sql<
        { pid: number; ro: string }[]
      >`SELECT pg_backend_pid() AS pid, current_setting('transaction_read_only') AS ro`;
      expect(after.pid).not.toBe(plainPid);
      expect(after.ro).toBe('off');

      const txPid = await readOnly();
      const inTx = await transaction(sql, (tx) => write(tx)).catch((err: unknown) => err);
      expect(inTx).toMatchObject({ code: '25006' });
      const [again] = await sql<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
      expect(again.pid).not.toBe(txPid);
      await write(sql);
    } finally {
      await sql.end();
    }
  });
});

describe('target_session_attrs', () => {
  it.each(['primary', 'read-write'])('%s skips the standby listed first', async (attrs) => {
    const sql = createSql(
      `postgres://postgres@127.0.0.1:${pg.standby.port},127.0.0.1:${pg.primary.port}/${DB}?target_session_attrs=${attrs}`,
      {
        max: 1,
      },
    );
    try {
      const [{ port }] = await sql<{ port: string }[]>`SELECT current_setting('port') AS port`;
      expect(Number(port)).toBe(pg.primary.port);
    } finally {
      await sql.end();
    }
  });
});

describe('PostgreSQL failover under writes', () => {
  it('after SIGKILL of the primary and promotion of the standby, every acknowledged event is in the ledger once and no 500 is answered', async () => {
    const bareUrl = `postgres://postgres@127.0.0.1:${pg.standby.port},127.0.0.1:${pg.primary.port}/${DB}`;
    const env = { ...t.env, DATABASE_URL: bareUrl, DB_ACQUIRE_TIMEOUT_MS: '2000', EVENT_WAIT_MS: String(EVENT_WAIT_MS) };
    const port = await freePort();
    const worker = start('workers/index.ts', env);
    const web = start('src/web.ts', { ...env, PORT: String(port) });
    await Promise.all([worker.waitFor(/workers started/), web.waitFor(/web listening/)]);

    const admin = createSql(pg.url(DB), { max: 1 });
    const app = await createApplication(admin, 'failover', [...SCOPES]).finally(() => admin.end());
    const headers = { Authorization: `Bearer ${app.apiKey}`, 'X-Service-App-ID': app.appId, 'Content-Type': 'application/json' };
    const base = `http://127.0.0.1:${port}`;

    const statuses = new Map<number, number>();
    const acked: Acked[] = [];
    let killedAt = 0;
    let firstCreatedAfterKill = 0;
    let stop = false;
    let longest = 0;
    /** A careful client: one Idempotency-Key per event, retried on 503 (and a refused connection) until acknowledged. */
    async function write(n: number): Promise<void> {
      const key = randomUUID();
      for (;;) {
        const sentAt = Date.now();
        const res = await apiFetch(`${base}/v1/events`, {
          method: 'POST',
          headers: { ...headers, 'Idempotency-Key': key },
          body: JSON.stringify({ event_type: 'failover.check', payload: { n } }),
          signal: AbortSignal.timeout(30_000),
        });
        longest = Math.max(longest, Date.now() - sentAt);
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status === 201 || res.status === 202) {
          const { id } = (await res.json()) as { id: string };
          acked.push({ n, id, status: res.status });
          // Sent after the kill: a request in flight at the kill may have committed before it.
          if (res.status === 201 && killedAt && sentAt > killedAt && !firstCreatedAfterKill) firstCreatedAfterKill = Date.now();
          return;
        }
        const body = await res.text();
        if (res.status !== 503) throw new Error(`POST /v1/events answered ${res.status}: ${body}`);
        await new Promise((r) => setTimeout(r, Number(res.headers.get('Retry-After') ?? 1) * 100));
      }
    }
    let next = 0;
    const writers = Array.from({ length: 3 }, async () => {
      while (!stop) await write(next++);
    });
    const failures: unknown[] = [];
    const watched = Promise.all(writers).catch((err: unknown) => {
      failures.push(err);
      stop = true;
    });
    const until = async (cond: () => boolean, what: string, ms = 90_000) => {
      const deadline = Date.now() + ms;
      while (!cond()) {
        if (failures.length) throw failures[0];
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };

    await until(() => acked.length >= 30, '30 events acknowledged before the fault');
    const before = acked.length;
    killedAt = Date.now();
    await pg.primary.kill();
    // An orchestrator takes a few seconds to decide the primary is gone: with no primary at
    // all meanwhile, requests must be answered 503 (and not hang, nor 500).
    await new Promise((r) => setTimeout(r, DETECTION_MS));
    await pg.promote();
    const promotedAfter = (Date.now() - killedAt) / 1000;
    await until(() => acked.length >= before + 30, '30 more events acknowledged after the promotion');
    stop = true;
    await watched;
    if (failures.length) throw failures[0];

    const outage = (firstCreatedAfterKill - killedAt) / 1000;
    console.log(
      `pg failover: standby promoted ${promotedAfter.toFixed(2)} s after the kill; first 201 to a request sent after it ${outage.toFixed(2)} s after it; ` +
        `statuses ${JSON.stringify(Object.fromEntries(statuses))}; longest answer ${(longest / 1000).toFixed(2)} s`,
    );
    expect(statuses.get(500) ?? 0).toBe(0);
    // With no primary for seconds, requests were answered 503 meanwhile, none held past the
    // wait for the ledger's commit plus the connect bound (5 s): a pool that waits for a
    // primary to appear would hold them for the whole outage.
    expect(statuses.get(503) ?? 0).toBeGreaterThan(0);
    expect(longest).toBeLessThan(EVENT_WAIT_MS + 5000);
    expect(firstCreatedAfterKill).toBeGreaterThan(0);

    // On the promoted server: every acknowledged event once, under the id it was acknowledged
    // with (a 202 is committed by the worker later: waited for, bounded).
    const ledger = postgres(`${pg.standby.base}/${DB}`, { max: 1, onnotice: () => {} });
    try {
      const missingOrDoubled = async () => {
        const rows = await ledger<{ id: string; n: number }[]>`
          SELECT id, (payload->>'n')::int AS n FROM events WHERE app_id = ${app.appId} AND event_type = 'failover.check'`;
        const byN = new Map<number, string[]>();
        for (const r of rows) byN.set(r.n, [...(byN.get(r.n) ?? []), r.id]);
        return acked.filter((a) => JSON.stringify(byN.get(a.n)) !== JSON.stringify([a.id]));
      };
      const deadline = Date.now() + 30_000;
      while ((await missingOrDoubled()).length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
      expect(await missingOrDoubled()).toEqual([]);
    } finally {
      await ledger.end();
    }
    for (const p of [web, worker]) expect(p.proc.exitCode).toBeNull();
  }, 240_000);
});

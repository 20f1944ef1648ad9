import { queueFor } from '../../src/queues.js';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWorkers } from '../../workers/index.js';
import { ADMIN_URL } from '../helpers/db.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

/**
 * A PostgreSQL outage, simulated on this file's own database only — connections refused
 * (ALLOW_CONNECTIONS false) and every open backend terminated — so the machine's server and
 * everyone else's databases are untouched.
 */
let s: TestStack;
let a: AppCredentials;
let admin: postgres.Sql;
let dbName: string;

beforeAll(async () => {
  s = await startTestStack({ env: { EVENT_WAIT_MS: '300' }, workers: false });
  a = await s.createApp();
  admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  dbName = new URL(s.env.DATABASE_URL).pathname.slice(1);
});
afterAll(async () => {
  await reopen();
  await admin.end();
  await s.close();
});

async function closeDatabase() {
  await admin.unsafe(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS false`);
  await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${dbName} AND pid <> pg_backend_pid()`;
}
async function reopen() {
  await admin.unsafe(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS true`);
}
const post = (n: number) => s.request('POST', '/v1/events', { auth: a, body: { event_type: 'pg.probe', payload: { n } } });

describe('PostgreSQL unavailable', () => {
  it('writes and reads answer 503 UNAVAILABLE, never 500, and the service recovers by itself', async () => {
    expect([201, 202]).toContain((await post(0)).status);
    await closeDatabase();
    try {
      for (const r of [await post(1), await s.request('GET', '/v1/events', { auth: a }), await s.gql(a, '{ application { id } }')]) {
        expect(r.status).toBe(503);
        expect(r.json.error.code).toBe('UNAVAILABLE');
      }
    } finally {
      await reopen();
    }
    const deadline = Date.now() + 10_000;
    let r = await post(2);
    while (r.status === 503 && Date.now() < deadline) r = await post(2);
    expect(r.status).toBe(202);
  });

  it('ledger jobs fail while it is down and retry until their events are committed', async () => {
    // Accepted (202: no worker yet), then the database closes and a worker starts on it.
    const ids: string[] = [];
    for (let n = 10; n < 15; n++) {
      const r = await post(n);
      expect(r.status).toBe(202);
      ids.push(r.json.id);
    }
    await closeDatabase();
    const worker = startWorkers(s.deps, ['ledger']);
    try {
      // Long enough for the first attempts to fail against the closed database.
      await new Promise((res) => setTimeout(res, 1500));
      // The web process enqueues the events it receives at about the same moment as one job.
      const jobs = await queueFor(s.deps.queues, 'ledger').getJobs(['wait', 'active', 'delayed', 'failed', 'prioritized']);
      const theirs = jobs.filter((j) =>
        ('events' in j.data ? j.data.events : [j.data.event]).some((e: { id: string }) => ids.includes(e.id)),
      );
      expect(theirs.length).toBeGreaterThan(0);
      const failedAttempts = theirs.reduce((n, j) => n + j.attemptsMade, 0);
      expect(failedAttempts).toBeGreaterThan(0);
      await reopen();
      const deadline = Date.now() + 20_000;
      let found = 0;
      while (Date.now() < deadline) {
        found = (await s.deps.sql`SELECT id FROM events WHERE app_id = ${a.appId} AND id = ANY(${ids}::uuid[])`.catch(() => [])).length;
        if (found === ids.length) break;
        await new Promise((res) => setTimeout(res, 200));
      }
      expect(found).toBe(ids.length);
    } finally {
      await worker.close();
    }
  });
});

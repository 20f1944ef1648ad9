import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { createLogger } from '../../src/logger.js';
import { enqueue, JOBS, type LedgerEvent, queueFor } from '../../src/queues.js';
import { startWorkers } from '../../workers/index.js';
import type { WorkerHost } from '../../workers/host.js';
import { createTestEnv, freePort, spawnService, type ChildService, type TestEnv } from '../helpers/stack.js';
import { apiFetch } from '../helpers/openapi-contract.js';

// A ledger job is made to "run for as long as the test likes" by holding the row lock its
// transaction needs (the application's ledger_heads row): the job is genuinely in flight —
// taken by the worker, inside its transaction — until the test commits its own.
let t: TestEnv;
let deps: Deps;
const children: ChildService[] = [];
let inProcessWorkers: WorkerHost | undefined;
const locks: { release(): Promise<void> }[] = [];

beforeAll(async () => {
  t = await createTestEnv({ LOG_LEVEL: 'info', WORKER_QUEUES: 'ledger', SHUTDOWN_TIMEOUT_MS: '30000', EVENT_WAIT_MS: '30000' });
  deps = createDeps(t.config, { logger: createLogger('silent') });
});
afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  for (const l of locks) await l.release();
  await inProcessWorkers?.close();
  await closeDeps(deps);
  await t.dropDatabase();
});

const event = (appId: string): LedgerEvent => ({
  id: randomUUID(),
  app_id: appId,
  event_type: 'drain.test',
  payload: {},
  edges: [],
  attachments: [],
});

/** Holds the application's ledger row lock until `release()`; ledger writes for it block meanwhile. */
async function holdLedgerLock(appId: string): Promise<{ release(): Promise<void> }> {
  await deps.sql`INSERT INTO ledger_heads (app_id) VALUES (${appId}) ON CONFLICT DO NOTHING`;
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => (locked = r));
  const tx = deps.sql.begin(async (sql) => {
    await sql`SELECT 1 FROM ledger_heads WHERE app_id = ${appId} FOR UPDATE`;
    locked();
    await released;
  });
  await isLocked;
  const handle = {
    async release() {
      release();
      await tx;
    },
  };
  locks.push(handle);
  return handle;
}

/** Resolves once some session is waiting for a row lock (the in-flight ledger transaction). */
async function untilBlockedOnLock(timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [{ n }] = await deps.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`;
    if (n > 0) return;
    if (Date.now() > deadline) throw new Error('no transaction blocked on the ledger lock');
    await new Promise((r) => setTimeout(r, 50));
  }
}

const committed = async (id: string) => (await deps.sql`SELECT 1 FROM events WHERE id = ${id}`).length === 1;

async function until(check: () => Promise<boolean>, timeoutMs = 5000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

/** 'connected', or the error code of a fresh TCP connection attempt. */
const tryConnect = (port: number) =>
  new Promise<string>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (err: Error & { code?: string }) => resolve(err.code ?? err.message));
  });

/** True when the process is still running `ms` after the call: it did not quit early. */
const stillRunningAfter = (c: ChildService, ms: number) =>
  Promise.race([c.exited.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), ms))]);

describe('SIGTERM', () => {
  it('a worker stops taking jobs, finishes the running one, closes and exits 0', async () => {
    const app = await createApplication(deps.sql, 'drain-worker', ['events:write']);
    const worker = spawnService('workers/index.ts', t.env);
    children.push(worker);
    await worker.waitFor(/workers started/);

    const lock = await holdLedgerLock(app.appId);
    const running = event(app.appId);
    await enqueue(deps.queues, 'ledger', { event: running });
    await untilBlockedOnLock();
    expect(await queueFor(deps.queues, 'ledger').getActiveCount()).toBe(1);

    worker.kill('SIGTERM');
    await worker.waitFor(/shutting down/);
    const late = event(app.appId);
    await enqueue(deps.queues, 'ledger', { event: late });
    // Draining: it does not quit while its job is still running.
    expect(await stillRunningAfter(worker, 1000)).toBe(true);

    await lock.release();
    expect(await worker.exited).toBe(0);
    expect(worker.output()).toMatch(/shutdown complete/);
    // The running job finished and committed; the job added after SIGTERM was left for another worker.
    expect(await committed(running.id)).toBe(true);
    expect(await (await queueFor(deps.queues, 'ledger').getJob(JOBS.ledger.jobId({ event: running })))?.getState()).toBe('completed');
    expect(await committed(late.id)).toBe(false);
    const lateJob = await queueFor(deps.queues, 'ledger').getJob(JOBS.ledger.jobId({ event: late }));
    expect(['waiting', 'delayed']).toContain(await lateJob?.getState());
    expect(lateJob?.attemptsMade).toBe(0);
  });

  it('a web process stops accepting connections, answers the in-flight request, and exits 0', async () => {
    // Whatever the first test left waiting is processed here too; the in-process worker is the committer.
    inProcessWorkers = startWorkers(deps, ['ledger']);
    const app = await createApplication(deps.sql, 'drain-web', ['events:write']);
    const port = await freePort();
    const web = spawnService('src/web.ts', { ...t.env, PORT: String(port) });
    children.push(web);
    await web.waitFor(/web listening/);
    const url = `http://127.0.0.1:${port}/v1/events`;
    const headers = { Authorization: `Bearer ${app.apiKey}`, 'X-Service-App-ID': app.appId, 'Content-Type': 'application/json' };

    const lock = await holdLedgerLock(app.appId);
    const inFlight = apiFetch(url, { method: 'POST', headers, body: JSON.stringify({ event_type: 'drain.web', payload: { n: 1 } }) });
    inFlight.catch(() => {}); // awaited below; a failure there is the assertion
    await untilBlockedOnLock();

    web.kill('SIGTERM');
    await web.waitFor(/shutting down/);
    // New connections are refused (the signal's log line can race the close by a moment)…
    expect(await until(async () => (await tryConnect(port)) === 'ECONNREFUSED')).toBe(true);
    // …while the request already in flight keeps the process up until it is answered.
    expect(await stillRunningAfter(web, 1000)).toBe(true);

    await lock.release();
    const r = await inFlight;
    expect(r.status).toBe(201);
    expect((await r.json()).payload).toEqual({ n: 1 });
    expect(await web.exited).toBe(0);
  });
});

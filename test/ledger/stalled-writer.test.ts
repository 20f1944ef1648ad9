import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { SCOPES } from '../../src/auth/scopes.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { enqueue, type LedgerEvent } from '../../src/queues.js';
import type { WorkerHost } from '../../workers/host.js';
import { startWorkers } from '../../workers/index.js';
import { eventually } from '../helpers/connections.js';
import { createTestEnv, spawnService, type ChildService, type TestEnv } from '../helpers/stack.js';

/**
 * A ledger worker frozen (SIGSTOP: what a long GC pause, a frozen container or a paused VM do)
 * inside its transaction, after it locked its application's head: the server must end its
 * session within LEDGER_IDLE_TIMEOUT_MS, so the application's next event commits in seconds,
 * and the frozen writer, thawed, must find its transaction gone rather than commit it.
 */
let t: TestEnv;
let deps: Deps;
let appId: string;
let frozen: ChildService | undefined;
let host: WorkerHost | undefined;

beforeAll(async () => {
  t = await createTestEnv({ LOG_LEVEL: 'info', WORKER_QUEUES: 'ledger' });
  deps = createDeps(t.config);
  appId = (await createApplication(deps.sql, 'stalled-writer', [...SCOPES])).appId;
});
afterAll(async () => {
  frozen?.kill('SIGKILL');
  await host?.close();
  await closeDeps(deps);
  await t.dropDatabase();
});

const event = (name: string): LedgerEvent => ({
  id: randomUUID(),
  app_id: appId,
  event_type: 'stall.probe',
  payload: { name },
  edges: [],
  attachments: [],
});

const committed = async (id: string) => (await deps.sql`SELECT 1 FROM events WHERE app_id = ${appId} AND id = ${id}`).length > 0;

describe('a ledger writer frozen inside its transaction', () => {
  it('holds its application for seconds: the next event commits within 5 s, and nothing is lost or doubled once it thaws', async () => {
    frozen = spawnService('workers/index.ts', t.env);
    await frozen.waitFor(/workers started/);

    // A lock on event_edges stops the frozen-to-be writer inside its transaction, after it
    // locked the head (its insert of the events and their edges waits): a point to freeze it at.
    const blocker = await deps.sql.reserve();
    await blocker`BEGIN`;
    await blocker`LOCK TABLE event_edges IN SHARE MODE`;
    const first = event('first');
    await enqueue(deps.queues, 'ledger', { event: first });
    const pid = await eventually(
      async () => {
        const [r] = await deps.sql<{ pid: number }[]>`
          SELECT pid FROM pg_locks WHERE NOT granted AND relation = 'event_edges'::regclass`;
        return r?.pid;
      },
      30_000,
      'the worker to wait on event_edges inside its ledger transaction',
    );
    const heads = await deps.sql`
      SELECT 1 FROM pg_locks WHERE pid = ${pid} AND granted AND relation = 'ledger_heads'::regclass AND mode = 'RowShareLock'`;
    expect(heads.length, 'the waiting writer holds the head (SELECT … FOR UPDATE)').toBe(1);

    frozen.kill('SIGSTOP');
    await blocker`COMMIT`;
    blocker.release();
    // Its insert completes; it cannot send COMMIT, so it sits idle in its transaction, holding the head.
    await eventually(
      async () =>
        (await deps.sql<{ state: string }[]>`SELECT state FROM pg_stat_activity WHERE pid = ${pid}`)[0]?.state === 'idle in transaction',
      5_000,
      'the frozen writer idle in its transaction',
    );

    host = startWorkers(deps, ['ledger']);
    const second = event('second');
    await enqueue(deps.queues, 'ledger', { event: second });
    await eventually(() => committed(second.id), 5_000, "the application's next event to commit while the writer is frozen");
    expect((await deps.sql`SELECT 1 FROM pg_stat_activity WHERE pid = ${pid}`).length, "the frozen writer's session was ended").toBe(0);

    frozen.kill('SIGCONT');
    // Its job is taken over once its lock lapses (or retried by the thawed writer): written once.
    await eventually(() => committed(first.id), 20_000, "the frozen writer's event to commit after all");
    // Thawed, it finds its session ended: its COMMIT fails, the job fails (and is retried).
    await frozen.waitFor(/"err":"[^"]*(CONNECTION_CLOSED|idle-in-transaction timeout)[^"]*","msg":"job failed"/, 20_000);
    expect(frozen.proc.exitCode, 'the thawed writer survives its lost session').toBeNull();

    const rows = await deps.sql<{ id: string; seq: number }[]>`SELECT id, seq FROM events WHERE app_id = ${appId} ORDER BY seq`;
    expect(rows).toEqual([
      { id: second.id, seq: 1 },
      { id: first.id, seq: 2 },
    ]);
    const [head] = await deps.sql<{ seq: number }[]>`SELECT seq FROM ledger_heads WHERE app_id = ${appId}`;
    expect(head.seq).toBe(2);
  }, 90_000);
});

import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import type { Sql } from '../../src/db.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { upsertParties } from '../../src/identity/platform-users.js';
import { recordParticipants } from '../../src/conversations/participants.js';
import { writeEvents } from '../../src/ledger/write.js';
import type { LedgerEvent } from '../../src/queues.js';
import { loadBodyEvents } from '../../src/webhooks/body.js';
import { createTestEnv, type TestEnv } from '../helpers/stack.js';

/**
 * The writes every send and every ingested event make look their batch up by index, whatever
 * the planner guesses of the batch's size: on a young ledger (thousands of rows not yet analyzed, as
 * in a deployment's first hours) a join against the batch hashed the whole table on every write.
 * The plans are the statements' own, as the server ran them (auto_explain, sent back as notices).
 */
let t: TestEnv;
let deps: Deps;
let traced: Sql;
const plans: string[] = [];
let appId: string;
let connId: string;

beforeAll(async () => {
  t = await createTestEnv();
  deps = createDeps(t.config);
  ({ appId } = await createApplication(deps.sql, 'write-plans', ['events:write']));
  [{ id: connId }] = await deps.sql<{ id: string }[]>`
    INSERT INTO platform_connections (app_id, platform, name, config_sealed, webhook_secret_sealed)
    VALUES (${appId}, 'TELEGRAM', 'c', 'x', 'x') RETURNING id`;
  // 10,000 of each, in this month's partition: a young deployment's ledger.
  await deps.sql`
    INSERT INTO events (id, app_id, seq, created_at, event_type, payload)
    SELECT gen_random_uuid(), ${appId}, g, now() - interval '1 minute' + g * interval '1 microsecond', 'order.placed', '{}'
      FROM generate_series(1, 10000) g`;
  await deps.sql`INSERT INTO ledger_heads (app_id, seq, last_at) VALUES (${appId}, 10000, now())`;
  await deps.sql`
    INSERT INTO event_edges (event_id, app_id, event_seq, event_created_at, edge_type, target_node_type, target_node_id, ord)
    SELECT id, app_id, seq, created_at, 'about', 'file', gen_random_uuid(), 0 FROM events`;
  await deps.sql`
    INSERT INTO users (id, app_id) SELECT md5('u' || g)::uuid, ${appId} FROM generate_series(1, 10000) g`;
  await deps.sql`
    INSERT INTO platform_users (app_id, platform_connection_id, platform, external_id, user_id)
    SELECT ${appId}, ${connId}, 'TELEGRAM', g::text, md5('u' || g)::uuid FROM generate_series(1, 10000) g`;
  await deps.sql`
    INSERT INTO conversations (app_id, platform_connection_id, external_id) SELECT ${appId}, ${connId}, g::text FROM generate_series(1, 10000) g`;
  // Not analyzed yet: the planner sizes the tables by their pages, as before autovacuum's first pass.

  traced = postgres(t.config.DATABASE_URL, { max: 1, onnotice: (n) => plans.push(String(n.message)) }) as unknown as Sql;
  await traced.unsafe(`LOAD 'auto_explain'`);
  await traced.unsafe(
    `SET auto_explain.log_min_duration = 0; SET auto_explain.log_level = 'notice'; SET auto_explain.log_nested_statements = on`,
  );
}, 120_000);
afterAll(async () => {
  await traced?.end();
  await closeDeps(deps);
  await t.dropDatabase();
});

/**
 * The tables among `tables` (or their partitions) that a plan the server ran for `work` read
 * whole. An empty partition (next month's) is rightly scanned rather than its index; a scan
 * of one holding rows is the failure.
 */
async function fullScans(work: () => Promise<unknown>, tables: string[]): Promise<string[]> {
  plans.length = 0;
  await work();
  expect(plans.length).toBeGreaterThan(0);
  const scanned = plans.flatMap((p) => [...p.matchAll(/Seq Scan on (\w+)/g)].map((m) => m[1]));
  const empty = new Set(
    (
      await deps.sql<{ name: string }[]>`
        SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'events'::regclass AND NOT EXISTS (SELECT 1 FROM events e WHERE e.tableoid = c.oid)`
    ).map((r) => r.name),
  );
  return scanned.filter(
    (name) =>
      !empty.has(name) &&
      !empty.has(name.replace(/^event_edges_/, 'events_')) &&
      tables.some((table) => name === table || name.startsWith(`${table}_`)),
  );
}

const orderPlaced = (over: Partial<LedgerEvent> = {}): LedgerEvent => ({
  id: randomUUID(),
  app_id: appId,
  event_type: 'order.placed',
  payload: {},
  edges: [],
  attachments: [],
  ...over,
});

describe('a batch written to a young ledger', () => {
  it('checks its event ids against the ledger by index, not by reading every event', async () => {
    const batch = Array.from({ length: 9 }, () => orderPlaced());
    expect(await fullScans(() => writeEvents(traced, batch), ['events', 'event_edges'])).toEqual([]);
  });

  it('reads what follows a commit by index: participants, delivery bodies', async () => {
    const [conversation] = await deps.sql<{ id: string }[]>`SELECT id FROM conversations LIMIT 1`;
    const committed = await writeEvents(deps.sql, [orderPlaced({ conversation_id: conversation.id })]);
    const asDeps = { sql: traced } as unknown as Deps;
    expect(await fullScans(() => recordParticipants(asDeps, committed), ['events', 'event_edges'])).toEqual([]);
    expect(await fullScans(() => loadBodyEvents(traced, committed), ['events', 'event_edges'])).toEqual([]);
  });

  it('finds or creates its recipients and conversations by index', async () => {
    const keys = ['17', '9000', 'new-1', 'new-2'].map((externalId) => ({ appId, connectionId: connId, platform: 'TELEGRAM', externalId }));
    expect(await fullScans(() => upsertParties(traced, keys, keys), ['platform_users', 'users', 'conversations'])).toEqual([]);
  });
});

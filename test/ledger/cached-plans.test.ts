import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { createConnectionCache } from '../../src/connections/connection-cache.js';
import { createConnection, type Connection } from '../../src/connections/connections.js';
import type { Sql } from '../../src/db.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { writeEvents } from '../../src/ledger/write.js';
import { claimBatch } from '../../src/messages/delivery.js';
import type { MessageRow } from '../../src/messages/messages.js';
import { createPartyResolver } from '../../src/messages/parties.js';
import { createSentSettler, type SettleSent } from '../../src/messages/settle.js';
import { createSubscriptionCache } from '../../src/webhooks/subscription-cache.js';
import { createTestEnv, type TestEnv } from '../helpers/stack.js';

/**
 * The hot writes find their rows by index however young the tables were when the connection
 * first ran them: a send batch's statements on outbound_messages (claim, settle) and the
 * ledger writer's on events. Each connection
 * keeps a statement's plan once it has run it a few times (a generic plan, PostgreSQL's plan
 * cache); one made while the table held a handful of rows reads the table whole, and nothing
 * replans it as the table grows until statistics change, which on a server without autovacuum
 * is never. The plans are the ones the server ran (auto_explain, sent back as notices).
 */
let t: TestEnv;
let deps: Deps;
let traced: Sql;
const plans: string[] = [];
const built: { query: string; untyped: number }[] = [];
let appId: string;
let conn: Connection;
let closeSubscriptions: () => Promise<void>;
let settle: SettleSent;

beforeAll(async () => {
  t = await createTestEnv();
  deps = createDeps(t.config);
  ({ appId } = await createApplication(deps.sql, 'batch-plans', ['events:write']));
  const made = await createConnection(deps, appId, {
    platform_name: 'TELEGRAM',
    name: 'bot',
    config: { bot_token: '770091:plans-bot_abcdef', api_base_url: 'http://127.0.0.1:9' },
  });
  if (!made.ok) throw new Error('connection');
  const connections = createConnectionCache(deps);
  conn = (await connections.get(appId, made.value.id))!;
  traced = postgres(t.config.DATABASE_URL, {
    max: 1,
    onnotice: (n) => plans.push(String(n.message)),
    // Each statement as the driver built it: the parameter types it declares (0: the server's to infer).
    debug: (_c, query, parameters: unknown[], types: number[]) =>
      built.push({ query, untyped: types.filter((ty, i) => !ty && parameters[i] !== null).length }),
  }) as unknown as Sql;
  await traced.unsafe(`LOAD 'auto_explain'`);
  await traced.unsafe(
    `SET auto_explain.log_min_duration = 0; SET auto_explain.log_level = 'notice'; SET auto_explain.log_nested_statements = on`,
  );
  const subscriptions = createSubscriptionCache(deps);
  closeSubscriptions = () => subscriptions.close();
  // Settles through the traced connection, so its plans are the ones kept and read.
  settle = createSentSettler(
    { ...deps, sql: traced },
    { subscriptions, localFirstAttempts: undefined },
    createPartyResolver(deps, connections),
  );
}, 120_000);
afterAll(async () => {
  await closeSubscriptions?.();
  await traced?.end();
  await closeDeps(deps);
  await t.dropDatabase();
});

/** `n` queued messages to new recipients, as the web records them. */
async function queued(n: number): Promise<MessageRow[]> {
  return deps.sql<MessageRow[]>`
    INSERT INTO outbound_messages (id, app_id, platform_connection_id, to_external_id, recipient_seq, text)
    SELECT gen_random_uuid(), ${appId}, ${conn.id}, ${randomUUID()} || g, 1, 'hello' FROM generate_series(1, ${n}) g
    RETURNING *`;
}

/** One batch job's statements on the traced connection: claim (which loads), settle. */
async function runBatch(): Promise<void> {
  const sql = traced;
  const msgs = await queued(8);
  const claim = randomUUID();
  const claimed = await claimBatch({ ...deps, sql }, msgs, claim, 60_000);
  expect(claimed).toHaveLength(8);
  const sent = await Promise.all(claimed.map((m) => settle({ msg: m, conn, externalMessageId: `x-${m.id}`, claim })));
  expect(sent.every(Boolean)).toBe(true);
}

/** The first lines of each plan the server ran for `work` that reads `table` whole. */
async function fullScans(work: () => Promise<unknown>, table: string): Promise<string[]> {
  plans.length = 0;
  await work();
  expect(plans.length).toBeGreaterThan(0);
  return plans.filter((p) => new RegExp(`Seq Scan on ${table}\\b`).test(p)).map((p) => p.split('\n').slice(0, 4).join(' '));
}

describe('round trips of the unnamed statements', () => {
  it("sends a batch's claim and settle with every parameter typed, so neither is described first", async () => {
    // Planned at each run (freshlyPlanned), they are never prepared; a parameter the server
    // had to infer would cost a describe round trip before each run (patches/, test/driver).
    built.length = 0;
    await runBatch();
    const hot = built.filter((b) => /^\s*(UPDATE outbound_messages m|WITH guard AS)/.test(b.query));
    expect(hot.map((b) => b.query.trim().split(/\s+/).slice(0, 3).join(' '))).toEqual(['UPDATE outbound_messages m', 'WITH guard AS']);
    expect(hot.map((b) => b.untyped)).toEqual([0, 0]);
  });
});

describe('plans kept from young tables', () => {
  it('reads its messages by index even with plans its connection made while the table was young', async () => {
    // Young: the connection runs the batch statements often enough to keep generic plans.
    for (let i = 0; i < 8; i++) await runBatch();
    // The table grows (a day of sends, settled) without being analyzed.
    await deps.sql`
      INSERT INTO outbound_messages (id, app_id, platform_connection_id, to_external_id, recipient_seq, text, status, external_message_id, finished_at)
      SELECT gen_random_uuid(), ${appId}, ${conn.id}, 'old' || g, 1, 'hello', 'sent', g::text, now() FROM generate_series(1, 10000) g`;
    expect(await fullScans(() => runBatch(), 'outbound_messages')).toEqual([]);
  });

  it("checks the ledger's new event ids by index after the ledger has grown", async () => {
    const event = () => ({ id: randomUUID(), app_id: appId, event_type: 'order.placed', payload: {}, edges: [], attachments: [] });
    for (let i = 0; i < 8; i++) await writeEvents(traced, Array.from({ length: 5 }, event));
    await deps.sql`
      INSERT INTO events (id, app_id, seq, created_at, event_type, payload)
      SELECT gen_random_uuid(), ${appId}, 1000000 + g, now() - interval '1 minute' + g * interval '1 microsecond', 'order.placed', '{}'
        FROM generate_series(1, 10000) g`;
    // The events of this month's partition: the one the writes go to.
    const scans = await fullScans(() => writeEvents(traced, Array.from({ length: 5 }, event)), 'events_\\w+');
    expect(scans).toEqual([]);
  });
});

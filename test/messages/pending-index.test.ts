import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { createTestEnv, type TestEnv } from '../helpers/stack.js';

let t: TestEnv;
let deps: Deps;
let connId: string;

// One recipient with a long history (20,000 messages sent) and a few still under way: what
// a send asks of the ledger must not grow with the conversation's length.
beforeAll(async () => {
  t = await createTestEnv();
  deps = createDeps(t.config);
  const app = await createApplication(deps.sql, 'pending-idx', ['events:write']);
  const [conn] = await deps.sql<{ id: string }[]>`
    INSERT INTO platform_connections (app_id, platform, name, config_sealed, webhook_secret_sealed)
    VALUES (${app.appId}, 'TELEGRAM', 'c', 'x', 'x') RETURNING id`;
  connId = conn.id;
  await deps.sql`
    INSERT INTO outbound_messages (id, app_id, platform_connection_id, to_external_id, recipient_seq, text, status, finished_at)
    SELECT gen_random_uuid(), ${app.appId}, ${connId}, '42', g, 'm', CASE WHEN g > 20000 THEN 'queued' ELSE 'sent' END,
           CASE WHEN g > 20000 THEN NULL ELSE now() END
      FROM generate_series(1, 20003) g`;
  await deps.sql`ANALYZE outbound_messages`;
}, 60_000);
afterAll(async () => {
  await closeDeps(deps);
  await t.dropDatabase();
});

async function buffersOf(query: string): Promise<{ plan: string; buffers: number }> {
  const rows = await deps.sql.unsafe(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${query}`);
  const root = (rows[0]['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0].Plan;
  return { plan: JSON.stringify(root), buffers: Number(root['Shared Hit Blocks']) + Number(root['Shared Read Blocks']) };
}

describe('the unsettled messages of a recipient', () => {
  it('are found without reading its settled history (earlier pending, next pending)', async () => {
    // The statements of src/messages/delivery.ts, for the last pending message and the last sent one.
    const earlier = await buffersOf(`SELECT 1 FROM outbound_messages
       WHERE platform_connection_id = '${connId}' AND to_external_id = '42' AND recipient_seq < 20003 AND finished_at IS NULL LIMIT 1`);
    const none = await buffersOf(`SELECT 1 FROM outbound_messages
       WHERE platform_connection_id = '${connId}' AND to_external_id = '42' AND recipient_seq < 20001 AND finished_at IS NULL LIMIT 1`);
    const next = await buffersOf(`SELECT id FROM outbound_messages
       WHERE platform_connection_id = '${connId}' AND to_external_id = '42' AND recipient_seq > 20000 AND finished_at IS NULL
       ORDER BY recipient_seq LIMIT 1`);
    for (const q of [earlier, none, next]) {
      expect(q.plan).toMatch(/outbound_messages_pending_idx/);
      expect(q.buffers).toBeLessThan(10);
    }
  });

  it('keep finished_at and status together', async () => {
    await expect(
      deps.sql`UPDATE outbound_messages SET status = 'sent' WHERE platform_connection_id = ${connId} AND recipient_seq = 20003`,
    ).rejects.toThrow(/outbound_messages_finished_with_status/);
  });
});

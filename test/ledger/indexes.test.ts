import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { createTestEnv, type TestEnv } from '../helpers/stack.js';

let t: TestEnv;
let deps: Deps;
let appId: string;
let puId: string;

// 200k events across 20 applications: enough that the planner prefers indexes to scans.
beforeAll(async () => {
  t = await createTestEnv();
  deps = createDeps(t.config);
  const apps = await Promise.all(Array.from({ length: 20 }, (_, i) => createApplication(deps.sql, `idx-${i}`, ['events:read'])));
  appId = apps[0].appId;
  const ids = apps.map((a) => a.appId);
  await deps.sql`
    INSERT INTO events (id, app_id, seq, created_at, event_type, event_alias, payload)
    SELECT gen_random_uuid(), (${ids}::uuid[])[1 + (g % 20)], g, now() + g * interval '1 microsecond',
           (ARRAY['message.inbound','message.outbound','order.placed','order.paid'])[1 + (g % 4)],
           CASE WHEN g % 4 = 0 THEN (ARRAY['message.telegram.inbound','message.sms.inbound'])[1 + (g / 4) % 2] END,
           jsonb_build_object('amount', g % 1000)
      FROM generate_series(1, 200000) g`;
  [{ id: puId }] = await deps.sql<
    { id: string }[]
  >`INSERT INTO platform_users (app_id, platform, external_id) VALUES (${appId}, 'TELEGRAM', '1') RETURNING id`;
  // Every event has an edge to some platform user; ours is one of thousands.
  await deps.sql`
    INSERT INTO event_edges (event_id, app_id, event_seq, event_created_at, edge_type, target_node_type, target_node_id, ord)
    SELECT id, app_id, seq, created_at, 'sent_by', 'platform_user',
           CASE WHEN app_id = ${appId} AND seq % 100 = 0 THEN ${puId}::uuid ELSE gen_random_uuid() END, 0
      FROM events`;
  await deps.sql`ANALYZE events`;
  await deps.sql`ANALYZE event_edges`;
}, 120_000);
afterAll(async () => {
  await closeDeps(deps);
  await t.dropDatabase();
});

async function plan(query: string): Promise<string> {
  const rows = await deps.sql.unsafe(`EXPLAIN ${query}`);
  return rows.map((r) => r['QUERY PLAN']).join('\n');
}

/**
 * The tables a plan reads whole that hold rows. The planner rightly scans an empty partition
 * (next month's, say) rather than its index; a scan of one that holds data is the failure.
 */
async function fullScansOfData(p: string): Promise<string[]> {
  const scanned = [...p.matchAll(/Seq Scan on (\w+)/g)].map((m) => m[1]);
  const withRows = await deps.sql<{ name: string }[]>`
    SELECT DISTINCT tableoid::regclass::text AS name FROM events
    UNION SELECT DISTINCT tableoid::regclass::text FROM event_edges`;
  return scanned.filter((t) => withRows.some((r) => r.name === t) || t === 'events' || t === 'event_edges');
}

describe('ledger reads are index-backed', () => {
  it('pages by cursor on (app_id, seq)', async () => {
    const p = await plan(`SELECT id FROM events e WHERE e.app_id = '${appId}' AND e.seq > 1000 ORDER BY e.seq LIMIT 50`);
    // One index per partition (events is partitioned by month): events_p202612_app_id_seq_created_at_key…
    expect(p).toMatch(/Index Scan using events_\w*app_id_seq\w*_key/);
    expect(await fullScansOfData(p)).toEqual([]);
  });

  it("finds an event by id through each partition's key, as reads and the write path's duplicate check do", async () => {
    const [{ id }] = await deps.sql<{ id: string }[]>`SELECT id FROM events WHERE app_id = ${appId} LIMIT 1`;
    for (const q of [`SELECT * FROM events WHERE app_id = '${appId}' AND id = '${id}'`, `SELECT 1 FROM events e WHERE e.id = '${id}'`]) {
      const p = await plan(q);
      expect(p).toMatch(/Index (Only )?Scan using events_\w*pkey/);
      expect(await fullScansOfData(p)).toEqual([]);
    }
  });

  it('filters event types by exact name and by prefix through (app_id, event_type, seq)', async () => {
    const exact = await plan(`SELECT id FROM events e WHERE e.app_id = '${appId}' AND e.event_type = 'order.paid' ORDER BY e.seq LIMIT 50`);
    expect(await fullScansOfData(exact)).toEqual([]);
    const prefix = await plan(
      `SELECT id FROM events e WHERE e.app_id = '${appId}' AND e.event_type LIKE 'order.%' ORDER BY e.seq LIMIT 50`,
    );
    expect(await fullScansOfData(prefix)).toEqual([]);
  });

  it('filters by an alias through (app_id, event_alias, seq), exact or under a prefix', async () => {
    const exact = await plan(
      `SELECT id FROM events e WHERE e.app_id = '${appId}' AND e.event_alias = 'message.sms.inbound' ORDER BY e.seq LIMIT 50`,
    );
    expect(exact).toMatch(/events_\w*alias\w*idx/);
    expect(await fullScansOfData(exact)).toEqual([]);
    const prefix = await plan(
      `SELECT id FROM events e WHERE e.app_id = '${appId}' AND (e.event_type LIKE 'message.s%' OR e.event_alias LIKE 'message.s%') ORDER BY e.seq LIMIT 50`,
    );
    expect(await fullScansOfData(prefix)).toEqual([]);
  });

  it('resolves hasEdge through event_edges(app_id, target_node_id, edge_type, event_seq)', async () => {
    const p = await plan(`SELECT e.id FROM events e WHERE e.app_id = '${appId}' AND EXISTS (
      SELECT 1 FROM event_edges x WHERE x.event_id = e.id AND x.app_id = '${appId}' AND x.edge_type = 'sent_by' AND x.target_node_id = '${puId}')
      ORDER BY e.seq LIMIT 50`);
    expect(p).toMatch(/event_edges_\w*target_idx/);
    expect(await fullScansOfData(p)).toEqual([]);
  });
});

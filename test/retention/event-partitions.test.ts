import { randomBytes, randomUUID } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { runner } from 'node-pg-migrate';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { createSql, type Sql } from '../../src/db.js';
import { eventPartitions, maintainEventPartitions, MONTHS_AHEAD } from '../../src/ledger/partitions.js';
import { getEvent, listEvents } from '../../src/ledger/read.js';
import { writeEvents } from '../../src/ledger/write.js';
import { ensureDatabase, migrate } from '../../src/migrate.js';
import { projectRoot } from '../../src/project-root.js';
import type { LedgerEvent } from '../../src/queues.js';
import { ADMIN_URL, TEST_DB_PREFIX, dbUrl } from '../helpers/db.js';
import { createTestEnv, type TestEnv } from '../helpers/stack.js';

const PARTITIONING = '1700000000075_events_partitioned';
const monthStart = (d: Date, plus = 0) => new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + plus, 1));
const suffix = (d: Date) => `p${d.getUTCFullYear()}${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
const event = (appId: string, over: Partial<LedgerEvent> = {}): LedgerEvent => ({
  id: randomUUID(),
  app_id: appId,
  event_type: 'order.placed',
  payload: {},
  edges: [{ edge_type: 'about', target_node_type: 'file', target_node_id: randomUUID() }],
  attachments: [],
  ...over,
});

describe('the partitioning migration', () => {
  const name = `${TEST_DB_PREFIX}p${randomBytes(5).toString('hex')}`;
  afterAll(async () => {
    const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
    await admin.end();
  });

  it('converts a ledger that already has events and edges, keeping every row where reads find it', async () => {
    const url = dbUrl(name);
    await ensureDatabase(url);
    const before = readdirSync(join(projectRoot(), 'migrations'))
      .filter((f) => f.endsWith('.sql'))
      .sort()
      .findIndex((f) => f.startsWith(PARTITIONING));
    await runner({
      databaseUrl: url,
      dir: join(projectRoot(), 'migrations'),
      direction: 'up',
      count: before,
      migrationsTable: 'pgmigrations',
      log: () => {},
    });
    const sql = createSql(url, { max: 2 });
    try {
      const { appId } = await createApplication(sql, 'before', ['admin']);
      // Events from years ago up to now, as the unpartitioned ledger wrote them.
      await sql`
        INSERT INTO events (id, app_id, seq, created_at, event_type, payload)
        SELECT gen_random_uuid(), ${appId}, g, now() - (1000 - g) * interval '1 day', 'order.placed', '{}' FROM generate_series(1, 1000) g`;
      await sql`
        INSERT INTO event_edges (event_id, app_id, event_seq, edge_type, target_node_type, target_node_id, ord)
        SELECT id, app_id, seq, 'about', 'file', gen_random_uuid(), 0 FROM events`;
      await sql`INSERT INTO ledger_heads (app_id, seq, last_at) VALUES (${appId}, 1000, now())`;
      const [old] = await sql<{ id: string }[]>`SELECT id FROM events WHERE seq = 1`;

      await migrate(url);

      const [{ kind }] = await sql<{ kind: string }[]>`SELECT relkind::text AS kind FROM pg_class WHERE relname = 'events'`;
      expect(kind).toBe('p');
      const [counts] = await sql<{ events: number; edges: number; placed: number }[]>`
        SELECT (SELECT count(*)::int FROM events) AS events, (SELECT count(*)::int FROM event_edges) AS edges,
               (SELECT count(*)::int FROM event_edges x JOIN events e ON e.id = x.event_id AND e.created_at = x.event_created_at) AS placed`;
      expect(counts).toEqual({ events: 1000, edges: 1000, placed: 1000 });
      const parts = await eventPartitions(sql);
      expect(parts[0]).toMatchObject({ name: 'events_legacy', lower: null });
      const next = monthStart(new Date(), 1);
      expect(parts.map((p) => p.name)).toEqual(['events_legacy', ...[0, 1, 2].map((i) => `events_${suffix(monthStart(next, i))}`)]);
      expect(parts[0].upper.getTime()).toBe(next.getTime());

      // Reads by cursor and id find the old rows; a retried write of an old id adds nothing.
      expect((await getEvent(sql, appId, old.id))?.edges).toHaveLength(1);
      expect((await listEvents(sql, appId, { afterSeq: 990 }, 50)).map((e) => e.seq)).toEqual([
        991, 992, 993, 994, 995, 996, 997, 998, 999, 1000,
      ]);
      // (Only the new event takes a position: the next one after the head.)
      const again = await writeEvents(sql, [event(appId, { id: old.id }), event(appId)]);
      expect(again.map((e) => e.seq)).toEqual([1, 1001]);
      const [{ n }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE id = ${old.id}`;
      expect(n).toBe(1);

      // Deleting the application still takes its events and edges with it.
      await sql`DELETE FROM applications WHERE id = ${appId}`;
      const [left] = await sql<
        { events: number; edges: number }[]
      >`SELECT (SELECT count(*)::int FROM events) AS events, (SELECT count(*)::int FROM event_edges) AS edges`;
      expect(left).toEqual({ events: 0, edges: 0 });
    } finally {
      await sql.end();
    }
  });
});

describe('event partitions', () => {
  let t: TestEnv;
  let sql: Sql;
  let appId: string;
  beforeAll(async () => {
    t = await createTestEnv();
    sql = createSql(t.config.DATABASE_URL, { max: 4 });
    ({ appId } = await createApplication(sql, 'partitions', ['admin']));
  });
  afterAll(async () => {
    await sql.end();
    await t.dropDatabase();
  });

  it('writes a retried or concurrently repeated event id once', async () => {
    const e = event(appId);
    const results = await Promise.all(Array.from({ length: 8 }, () => writeEvents(sql, [e, event(appId)])));
    const [{ n }] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE id = ${e.id}`;
    expect(n).toBe(1);
    const seqs = new Set(results.map((r) => r.find((c) => c.id === e.id)!.seq));
    expect(seqs.size).toBe(1);
    const [{ edges }] = await sql<{ edges: number }[]>`SELECT count(*)::int AS edges FROM event_edges WHERE event_id = ${e.id}`;
    expect(edges).toBe(1);
  });

  it(`creates partitions ${MONTHS_AHEAD} months ahead of the clock, once however often it runs`, async () => {
    const later = monthStart(new Date(), 6);
    const first = await maintainEventPartitions(sql, 0, later);
    const last = (await eventPartitions(sql)).at(-1)!;
    expect(last.upper.getTime()).toBe(monthStart(later, MONTHS_AHEAD + 1).getTime());
    expect(first.created.at(-1)).toBe(`events_${suffix(monthStart(later, MONTHS_AHEAD))}`);
    expect(await maintainEventPartitions(sql, 0, later)).toEqual({ created: [], dropped: [] });
    const edges = await sql<
      { name: string }[]
    >`SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'event_edges'::regclass`;
    expect(edges.map((e) => e.name).sort()).toEqual(
      (await eventPartitions(sql)).map((p) => p.name.replace(/^events_/, 'event_edges_')).sort(),
    );
  });

  it('drops whole months older than the retention with their edges, keeping younger months and nothing when it is 0', async () => {
    const ids = async (table: 'events' | 'event_edges') =>
      (
        await sql<
          { id: string }[]
        >`SELECT ${sql(table === 'events' ? 'id' : 'event_id')}::text AS id FROM ${sql(table)} WHERE app_id = ${appId}`
      ).map((x) => x.id);
    const parts = await eventPartitions(sql);
    const b = parts[0].upper; // where the legacy partition ends: the first month partition
    const at = async (createdAt: Date) => {
      const id = randomUUID();
      await sql`INSERT INTO events (id, app_id, seq, created_at, event_type, payload) VALUES (${id}, ${appId}, ${Math.floor(Math.random() * 1e9)}, ${createdAt}, 'x', '{}')`;
      await sql`INSERT INTO event_edges (event_id, app_id, event_seq, event_created_at, edge_type, target_node_type, target_node_id, ord)
                VALUES (${id}, ${appId}, 0, ${createdAt}, 'about', 'file', ${randomUUID()}, 0)`;
      return id;
    };
    const inLegacy = await at(new Date(b.getTime() - 86_400_000));
    const inFirst = await at(new Date(b.getTime() + 86_400_000));
    const inSecond = await at(new Date(monthStart(b, 1).getTime() + 86_400_000));
    const now = new Date(monthStart(b, 1).getTime() + 15 * 86_400_000);

    expect((await maintainEventPartitions(sql, 0, now)).dropped).toEqual([]);
    expect(await ids('events')).toEqual(expect.arrayContaining([inLegacy, inFirst, inSecond]));
    const r = await maintainEventPartitions(sql, 10, now);
    expect(r.dropped).toEqual(['events_legacy', `events_${suffix(b)}`]);
    expect(await ids('events')).toEqual([inSecond]);
    expect(await ids('event_edges')).toEqual([inSecond]);
    const tables = await sql<
      { name: string }[]
    >`SELECT relname AS name FROM pg_class WHERE relname IN ('events_legacy', 'event_edges_legacy', ${`events_${suffix(b)}`}, ${`event_edges_${suffix(b)}`})`;
    expect(tables).toEqual([]);
  });
});

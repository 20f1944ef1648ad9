import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/project-root.js';
import { createTestDatabase } from '../helpers/db.js';

/**
 * The rules a distributed PostgreSQL (Citus) needs to shard every per-application table by
 * app_id, colocated (docs/SCALING.md, "Distributing PostgreSQL with Citus"), read from the
 * catalog of a freshly migrated database. A table is per-application when it has an app_id
 * column; every other table, and every table with app_id that must stay whole on each node, is
 * classified here with the reason.
 */
const REFERENCE: Record<string, string> = {
  applications: 'the tenants themselves: every per-application table references it',
  api_keys: 'found by the hash of the presented key before the application is known (src/auth/api-keys.ts)',
  portal_sessions: 'found by the hash of the sign-in link or session cookie before the application is known (src/portal/sessions.ts)',
  connection_routing_ids:
    'found by a platform account id on a shared inbound URL before the application is known, and unique across applications',
  shared_webhooks: 'one row per Meta-family platform, for the whole service',
  change_stamps: 'service-wide cache stamps (src/change-stamps.ts)',
};
const LOCAL: Record<string, string> = {
  pgmigrations: 'node-pg-migrate bookkeeping: only the coordinator runs migrations',
};

type Table = { name: string; has_app_id: boolean; partition_key: string[] | null };
type Key = { table: string; name: string; cols: string[] };
type Fk = { table: string; name: string; cols: string[]; ref_table: string; ref_cols: string[] };

async function readCatalog(sql: postgres.Sql) {
  const tables = await sql<Table[]>`
    SELECT c.relname AS name,
           EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'app_id' AND NOT a.attisdropped) AS has_app_id,
           (SELECT array_agg(a.attname ORDER BY k.i) FROM pg_partitioned_table p
              CROSS JOIN LATERAL unnest(p.partattrs::int2[]) WITH ORDINALITY AS k(attnum, i)
              JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
             WHERE p.partrelid = c.oid) AS partition_key
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition`;
  // Unique indexes, whether or not a constraint owns them: Citus enforces neither across shards.
  const keys = await sql<Key[]>`
    SELECT t.relname AS table, i.relname AS name,
           array(SELECT a.attname FROM unnest(x.indkey::int2[]) WITH ORDINALITY k(attnum, o)
                   JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum ORDER BY k.o) AS cols
      FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
      JOIN pg_namespace n ON n.oid = t.relnamespace
     WHERE n.nspname = 'public' AND x.indisunique AND NOT t.relispartition`;
  const fks = await sql<Fk[]>`
    SELECT t.relname AS table, k.conname AS name, r.relname AS ref_table,
           array(SELECT a.attname FROM unnest(k.conkey) WITH ORDINALITY u(attnum, o)
                   JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.attnum ORDER BY u.o) AS cols,
           array(SELECT a.attname FROM unnest(k.confkey) WITH ORDINALITY u(attnum, o)
                   JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.attnum ORDER BY u.o) AS ref_cols
      FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid JOIN pg_class r ON r.oid = k.confrelid
      JOIN pg_namespace n ON n.oid = t.relnamespace
     WHERE n.nspname = 'public' AND k.contype = 'f' AND NOT t.relispartition AND k.conparentid = 0`;
  return { tables, keys, fks };
}

/** Every way the migrated schema breaks the distribution rules, one line each. */
async function distributionFaults(sql: postgres.Sql): Promise<string[]> {
  const { tables, keys, fks } = await readCatalog(sql);
  const faults: string[] = [];
  const kind = new Map<string, 'distributed' | 'reference' | 'local'>();
  for (const t of tables) {
    if (t.name in REFERENCE) kind.set(t.name, 'reference');
    else if (t.name in LOCAL) kind.set(t.name, 'local');
    else if (t.has_app_id) kind.set(t.name, 'distributed');
    else faults.push(`${t.name}: no app_id column and not classified as a reference or local table`);
  }
  for (const name of [...Object.keys(REFERENCE), ...Object.keys(LOCAL)]) {
    if (!tables.some((t) => t.name === name)) faults.push(`${name}: classified but no such table`);
  }
  for (const k of keys) {
    if (kind.get(k.table) !== 'distributed') continue;
    if (!k.cols.includes('app_id')) faults.push(`${k.table}: unique key ${k.name} (${k.cols.join(', ')}) lacks app_id`);
    const part = tables.find((t) => t.name === k.table)?.partition_key ?? [];
    for (const c of part) if (!k.cols.includes(c)) faults.push(`${k.table}: unique key ${k.name} lacks partition key ${c}`);
  }
  for (const f of fks) {
    const from = kind.get(f.table);
    const to = kind.get(f.ref_table);
    if (to === 'local') faults.push(`${f.table}: foreign key ${f.name} references local table ${f.ref_table}`);
    if (from === 'reference' && to === 'distributed') {
      faults.push(`${f.table}: foreign key ${f.name} from a reference table to distributed ${f.ref_table}`);
    }
    if (from === 'distributed' && to === 'distributed') {
      const i = f.cols.indexOf('app_id');
      if (i < 0 || f.ref_cols[i] !== 'app_id') {
        faults.push(
          `${f.table}: foreign key ${f.name} (${f.cols.join(', ')}) → ${f.ref_table} (${f.ref_cols.join(', ')}) is not by app_id`,
        );
      }
    }
  }
  return faults.sort();
}

describe('the distribution rules (Citus, by app_id)', () => {
  let db: Awaited<ReturnType<typeof createTestDatabase>>;
  let sql: postgres.Sql;
  beforeAll(async () => {
    db = await createTestDatabase();
    sql = postgres(db.url, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await sql.end();
    await db.drop();
  });

  it('hold for every table of the migrated schema', async () => {
    expect(await distributionFaults(sql)).toEqual([]);
  });

  it('fail a new table that breaks them', async () => {
    await sql
      .begin(async (tx) => {
        await tx`CREATE TABLE unclassified (id uuid PRIMARY KEY)`;
        await tx`CREATE TABLE widgets (id uuid PRIMARY KEY, app_id uuid NOT NULL, name text, UNIQUE (app_id, name))`;
        await tx`ALTER TABLE users ADD CONSTRAINT users_widget UNIQUE (id)`;
        await tx`CREATE TABLE gadgets (app_id uuid NOT NULL, id uuid, widget_id uuid REFERENCES users (id), PRIMARY KEY (app_id, id))`;
        await tx`ALTER TABLE connection_routing_ids ADD CONSTRAINT routing_conn FOREIGN KEY (app_id, connection_id) REFERENCES platform_connections (app_id, id)`;
        expect(await distributionFaults(tx as unknown as postgres.Sql)).toEqual([
          'connection_routing_ids: foreign key routing_conn from a reference table to distributed platform_connections',
          'gadgets: foreign key gadgets_widget_id_fkey (widget_id) → users (id) is not by app_id',
          'unclassified: no app_id column and not classified as a reference or local table',
          'users: unique key users_widget (id) lacks app_id',
          'widgets: unique key widgets_pkey (id) lacks app_id',
        ]);
        throw new Rollback();
      })
      .catch((err) => {
        if (!(err instanceof Rollback)) throw err;
      });
  });

  it('are what docs/SCALING.md distributes', async () => {
    const doc = readFileSync(join(projectRoot(), 'docs/SCALING.md'), 'utf8');
    const { tables } = await readCatalog(sql);
    for (const t of tables) {
      if (t.name in LOCAL) expect(doc, t.name).not.toContain(`'${t.name}'`);
      else if (t.name in REFERENCE) expect(doc, t.name).toContain(`SELECT create_reference_table('${t.name}');`);
      else expect(doc, t.name).toMatch(new RegExp(`SELECT create_distributed_table\\('${t.name}', 'app_id'`));
    }
  });
});

class Rollback extends Error {}

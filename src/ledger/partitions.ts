import { transaction, type Sql } from '../db.js';

/** Months of partitions kept ready beyond the current one, so a failed run or two never stops inserts. */
export const MONTHS_AHEAD = 3;

interface Partition {
  name: string;
  /** Null for the legacy partition, which starts at MINVALUE. */
  lower: Date | null;
  upper: Date;
}

/** The partitions of `events`, oldest first, with their bounds read back from the catalog. */
export async function eventPartitions(sql: Sql): Promise<Partition[]> {
  return sql<Partition[]>`
    SELECT c.relname AS name,
           (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \\(''([^'']+)''\\)'))[1]::timestamptz AS lower,
           (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \\(''([^'']+)''\\)'))[1]::timestamptz AS upper
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'events'::regclass
     ORDER BY upper`;
}

const monthStart = (d: Date, plus = 0) => new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + plus, 1));
const suffix = (d: Date) => `p${d.getUTCFullYear()}${String(d.getUTCMonth() + 1).padStart(2, '0')}`;
/** An events partition's twin in event_edges: events_p202612 → event_edges_p202612. */
const edgesOf = (name: string) => name.replace(/^events_/, 'event_edges_');

/**
 * Keeps the events table's monthly partitions (and event_edges' twins) in shape: creates them
 * up to MONTHS_AHEAD months past `now`, and, when `retentionDays` > 0 (EVENT_RETENTION_DAYS),
 * drops every month whose newest possible event is older than the retention — a DETACH
 * CONCURRENTLY and a DROP per table, which cost the same whatever the month holds and never
 * block the ledger's inserts. The newest partition is never dropped. Safe to run from several
 * processes: a partition another run just created or dropped is skipped.
 */
export async function maintainEventPartitions(
  sql: Sql,
  retentionDays: number,
  now = new Date(),
): Promise<{ created: string[]; dropped: string[] }> {
  const created: string[] = [];
  const dropped: string[] = [];
  const parts = await eventPartitions(sql);
  const until = monthStart(now, MONTHS_AHEAD + 1);
  for (let from = parts.at(-1)!.upper; from < until; from = monthStart(from, 1)) {
    const to = monthStart(from, 1);
    const name = `events_${suffix(from)}`;
    await transaction(sql, async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(hashtext('event-partitions'))`;
      // Another process may have made it while this one waited for the lock.
      const [{ have }] = await tx<{ have: boolean }[]>`SELECT to_regclass(${name}) IS NOT NULL AS have`;
      if (have) return;
      // DDL takes no bind parameters; the bounds are ISO strings of our own making.
      const bounds = `FOR VALUES FROM ('${from.toISOString()}') TO ('${to.toISOString()}')`;
      await tx.unsafe(`CREATE TABLE "${name}" PARTITION OF events ${bounds}`);
      await tx.unsafe(`CREATE TABLE "${edgesOf(name)}" PARTITION OF event_edges ${bounds}`);
      created.push(name);
    });
  }
  if (retentionDays > 0) {
    const cutoff = new Date(now.getTime() - retentionDays * 86_400_000);
    for (const p of parts.slice(0, -1)) {
      if (p.upper > cutoff) break;
      await detachAndDrop(sql, 'event_edges', edgesOf(p.name));
      await detachAndDrop(sql, 'events', p.name);
      dropped.push(p.name);
    }
  }
  return { created, dropped };
}

/**
 * DETACH … CONCURRENTLY (it cannot run inside a transaction, and never blocks inserts into the
 * other partitions), then DROP. A run that died half-way is finished: a detach left pending is
 * finalised, a table already detached or dropped by another run is taken as it is.
 */
async function detachAndDrop(sql: Sql, parent: string, table: string): Promise<void> {
  try {
    await sql`ALTER TABLE ${sql(parent)} DETACH PARTITION ${sql(table)} CONCURRENTLY`;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === '55000') await sql`ALTER TABLE ${sql(parent)} DETACH PARTITION ${sql(table)} FINALIZE`;
    else if (code !== '42P01' && code !== '42P16') throw err;
  }
  await sql`DROP TABLE IF EXISTS ${sql(table)}`;
}

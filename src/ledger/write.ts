import type postgres from 'postgres';
import { freshlyPlanned, transaction, typed, type Sql, type Tx } from '../db.js';
import { storableText } from '../storable-text.js';
import type { LedgerEvent } from '../queues.js';
import { eventAlias } from './event-types.js';

/** What a commit reports per event: enough for wakes, cursors and the webhook fan-out. */
export interface CommittedEvent {
  id: string;
  app_id: string;
  seq: number;
  /** ISO 8601 with microseconds (CREATED_AT_ISO), as readers see it. */
  created_at: string;
  event_type: string;
  /** The other name the event also answers to (eventAlias), matched beside its type. */
  event_alias: string | null;
  channels: string[];
  conversation_id: string | null;
  /** Where its commit was traced from (LedgerEvent.trace, else its job's span); tracing on only. */
  trace?: string;
}

/** created_at as ISO 8601 with microseconds: the ledger's own precision, so cursors stay exact. */
export const CREATED_AT_ISO = `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/**
 * Writes a batch of events in one transaction (group commit) and returns every event of the
 * batch as committed — including ones an earlier attempt already wrote, so a retried job
 * still wakes readers and fans out, while writing nothing twice (an id already in the
 * ledger is skipped under the application's lock).
 *
 * The ledger invariant — for one application, an event that becomes visible never sorts
 * before one a reader could already see — is kept by serialising commits per application:
 * a locking read of the application's `ledger_heads` row takes its row lock inside the
 * transaction, and the UPDATE of that row assigns `seq` (and a strictly increasing
 * `created_at`) from the head.
 * A second writer of the same application blocks on that row until the first has committed
 * and become visible (Postgres releases row locks only after the commit is visible), then
 * continues from the new head. So positions are handed out in commit order, and a reader
 * paging by `seq > cursor` can never later find a smaller position appear behind it.
 * `now()`, clock_timestamp() or a sequence alone would not do: they are fixed before commit,
 * and transactions commit in any order. Applications are locked in sorted order so two
 * batches spanning the same applications cannot deadlock. Holding the lock costs one short
 * transaction per batch, not per event, which is why this worker group-commits.
 */
export async function writeEvents(sql: Sql, events: LedgerEvent[], hold?: HoldBounds): Promise<CommittedEvent[]> {
  const unique = uniqueEvents(events);
  const prepared = prepareEvents(unique);
  const committed = await transaction(sql, (tx) => insertPrepared(tx, prepared, hold));
  return completeCommitted(sql, unique, committed);
}

/**
 * How long one ledger transaction may hold, or wait for, an application's head (ms). A writer
 * frozen inside its transaction (a GC pause, SIGSTOP, a paused VM) would otherwise hold the
 * head, and every write of that application, until the session-wide idle timeout. `idleMs`:
 * the server ends the session idle inside the transaction this long, which rolls it back — a
 * writer that wakes after it finds its connection closed and its COMMIT failed, never
 * committed. `lockMs`: a writer waiting for a lock this long gives up (55P03) and its batch is
 * retried. Absent, the session's own settings apply.
 */
export interface HoldBounds {
  idleMs: number;
  lockMs: number;
}

/**
 * The same write in one statement of the caller's, for a fact that must commit together with
 * its event (a send's `sent` state and its `message.outbound`): `guard` is a data-modifying
 * CTE named `guard` returning the `id`s whose events are written — the fact's own change
 * decides, so an event is written exactly when its fact changed, and needs no check against
 * the ledger. Same head lock and ordering invariant as writeEvents: the guard runs first (the
 * head's update depends on it), then the application's head is locked until the statement
 * commits. `extra` adds CTEs after `ins` (e.g. rows keyed by the inserted events). One
 * application per statement; returns the events written. Planned at each run (freshlyPlanned):
 * the guard finds its fact's rows by id in a growing table.
 */
export async function writeGuardedEvents(
  sql: Sql,
  appId: string,
  events: LedgerEvent[],
  guard: postgres.PendingQuery<postgres.Row[]>,
  extra?: postgres.PendingQuery<postgres.Row[]>,
): Promise<CommittedEvent[]> {
  if (events.some((e) => e.app_id !== appId)) throw new Error('writeGuardedEvents: events of one application only');
  const prepared = prepareEvents(uniqueEvents(events)).get(appId);
  if (!prepared) return [];
  return freshlyPlanned(sql<CommittedEvent[]>`
    WITH guard AS (${guard}),
    ${eventCtes(sql, appId, prepared, sql`r.id IN (SELECT id FROM guard)`)}
    ${extra ? sql`, ${extra}` : sql``}
    SELECT id, app_id, seq, ${sql.unsafe(CREATED_AT_ISO)} AS created_at, event_type, event_alias, channels, conversation_id FROM ins ORDER BY seq`);
}

const uniqueEvents = (events: LedgerEvent[]) => [...new Map(events.map((e) => [e.id, e])).values()];

interface PreparedApp {
  rows: string;
  edges: string;
}

// Serialised before the transaction: an event that cannot be (a RangeError: nested too deep)
// fails here, as the item's fault, instead of inside the driver with a transaction open.
// Sent as text (`typed.text`): a jsonb parameter would be serialised again by the driver.
function prepareEvents(unique: LedgerEvent[]): Map<string, PreparedApp> {
  const byApp = new Map<string, LedgerEvent[]>();
  for (const e of unique) {
    const group = byApp.get(e.app_id);
    if (group) group.push(e);
    else byApp.set(e.app_id, [e]);
  }
  const appIds = [...byApp.keys()].sort();
  return new Map(
    appIds.map((appId) => {
      const batch = byApp.get(appId)!;
      const rows = batch.map((e, i) => ({
        ord: i + 1,
        id: e.id,
        event_type: e.event_type,
        event_alias: eventAlias(e),
        channels: e.channels ?? [],
        // U+0000 cannot be stored in jsonb; producers refuse or replace it, this is the last guard.
        payload: storableText(e.payload),
        attachments: storableText(e.attachments ?? []),
        origin_event_id: e.origin_event_id ?? null,
        conversation_id: e.conversation_id ?? null,
        platform_connection_id: e.platform_connection_id ?? null,
        validation_errors: e.validation_errors ?? null,
      }));
      const edges = batch.flatMap((e) => e.edges.map((edge, ord) => ({ event_id: e.id, ord, ...edge })));
      return [appId, { rows: JSON.stringify(rows), edges: JSON.stringify(edges) }] as const;
    }),
  );
}

/**
 * One application's events as common table expressions: `picked` (the rows `keep` admits, in
 * order), `head` (locks the application's head row and moves it past as many positions: seq
 * and a strictly increasing created_at), `ins` (the events at those positions) and `edges`
 * (theirs, joined to the inserted rows). The one implementation of how positions are handed out.
 */
function eventCtes(sql: Sql | Tx, appId: string, p: PreparedApp, keep: postgres.PendingQuery<postgres.Row[]>) {
  return sql`
    picked AS (
      SELECT r.*, row_number() OVER (ORDER BY r.ord) AS pos
        FROM jsonb_to_recordset(${typed.text(sql, p.rows)}::jsonb) AS r(
             ord int, id uuid, event_type text, event_alias text, channels text[], payload jsonb, attachments jsonb, origin_event_id uuid,
             conversation_id uuid, platform_connection_id uuid, validation_errors jsonb)
       WHERE ${keep}
    ), counted AS (
      SELECT count(*)::int AS n FROM picked
    ), head AS (
      -- Upserted: the head is created by the application's first write, whichever path it takes.
      INSERT INTO ledger_heads AS h (app_id, seq, last_at)
      SELECT ${typed.uuid(sql, appId)}, c.n, clock_timestamp() + (c.n - 1) * interval '1 microsecond' FROM counted c WHERE c.n > 0
      ON CONFLICT (app_id) DO UPDATE
         SET seq = h.seq + EXCLUDED.seq,
             last_at = GREATEST(clock_timestamp(), h.last_at + interval '1 microsecond') + (EXCLUDED.seq - 1) * interval '1 microsecond'
      RETURNING h.seq AS top_seq, h.last_at AS top_at
    ), ins AS (
      INSERT INTO events (id, app_id, seq, created_at, event_type, event_alias, channels, payload, attachments,
                          origin_event_id, conversation_id, platform_connection_id, validation_errors)
      SELECT r.id, ${typed.uuid(sql, appId)}, head.top_seq - c.n + r.pos, head.top_at - (c.n - r.pos) * interval '1 microsecond',
             r.event_type, r.event_alias, r.channels, r.payload, r.attachments, r.origin_event_id, r.conversation_id,
             r.platform_connection_id, r.validation_errors
        FROM head, counted c, picked r
      ORDER BY r.pos
      RETURNING id, app_id, seq, created_at, event_type, event_alias, channels, conversation_id
    ), edges AS (
      INSERT INTO event_edges (event_id, app_id, event_seq, event_created_at, edge_type, target_node_type, target_node_id, ord)
      SELECT r.event_id, ${typed.uuid(sql, appId)}, ins.seq, ins.created_at, r.edge_type, r.target_node_type, r.target_node_id, r.ord
        FROM jsonb_to_recordset(${typed.text(sql, p.edges)}::jsonb) AS r(
             event_id uuid, edge_type text, target_node_type text, target_node_id uuid, ord int)
        JOIN ins ON ins.id = r.event_id
    )`;
}

async function insertPrepared(tx: Tx, perApp: Map<string, PreparedApp>, hold?: HoldBounds): Promise<CommittedEvent[]> {
  const appIds = [...perApp.keys()];
  if (appIds.length === 0) return [];
  const out: CommittedEvent[] = [];
  // Local to this transaction, and first in its pipeline: in force before any head is locked.
  const bounded = hold
    ? tx`SELECT set_config('idle_in_transaction_session_timeout', ${typed.text(tx, String(hold.idleMs))}, true),
                set_config('lock_timeout', ${typed.text(tx, String(hold.lockMs))}, true)`
    : undefined;
  bounded?.catch(() => {});
  // Sent together (postgres.js pipelines them on the one connection): the head rows must
  // exist before the first UPDATE, and nothing needs the answer of the INSERT in between.
  const heads = tx`INSERT INTO ledger_heads (app_id) SELECT unnest(${appIds}::uuid[]) ORDER BY 1 ON CONFLICT DO NOTHING`;
  heads.catch(() => {});
  // The heads are locked (in sorted order) by a statement of their own, so that each insert
  // below starts — and takes its snapshot — only once a concurrent writer of the same
  // application has committed: its events are then visible to the NOT EXISTS that keeps an
  // id from being written twice. (events is partitioned by created_at, so no unique index
  // on the id alone can do it, and a retry gets a new created_at; an id belongs to one
  // application, so its writers are the ones this lock serialises.)
  // One statement per application (pipelined, in one order for every writer): no statement
  // locks rows of several applications, which a ledger sharded by application needs
  // (docs/SCALING.md, Citus).
  const locks = [...appIds].sort().map((appId) => tx`SELECT 1 FROM ledger_heads WHERE app_id = ${typed.uuid(tx, appId)} FOR UPDATE`);
  for (const l of locks) l.catch(() => {});
  try {
    await Promise.all(locks);
    for (const appId of appIds) {
      // One statement per application writes its events and their edges. An event an earlier
      // attempt already wrote is skipped (this snapshot was taken after the lock, so it sees
      // every earlier writer's commit) and adds no edge twice. The check is a probe of each
      // partition's id index per event: written as NOT EXISTS, the planner (which takes the
      // batch for 100 rows) hash-joins against every event of the ledger until it is large.
      const inserted = await tx<CommittedEvent[]>`
        WITH ${eventCtes(tx, appId, perApp.get(appId)!, tx`(SELECT 1 FROM events e WHERE e.app_id = ${typed.uuid(tx, appId)} AND e.id = r.id LIMIT 1) IS NULL`)}
        SELECT id, app_id, seq, ${tx.unsafe(CREATED_AT_ISO)} AS created_at, event_type, event_alias, channels, conversation_id FROM ins ORDER BY seq`;
      out.push(...inserted);
    }
  } catch (err) {
    // Their own failure, if one failed, is the one to report.
    await bounded;
    await heads;
    throw err;
  }
  await bounded;
  await heads;
  return out;
}

/** Adds the events an earlier attempt already wrote, as they were committed then. */
async function completeCommitted(sql: Sql, unique: LedgerEvent[], committed: CommittedEvent[]): Promise<CommittedEvent[]> {
  if (committed.length < unique.length) {
    const got = new Set(committed.map((c) => c.id));
    const earlier = unique.filter((e) => !got.has(e.id));
    committed.push(
      ...(await sql<CommittedEvent[]>`
        SELECT e.id, e.app_id, e.seq, ${sql.unsafe(CREATED_AT_ISO.replace('created_at', 'e.created_at'))} AS created_at, e.event_type, e.event_alias, e.channels, e.conversation_id
          FROM events e
          JOIN unnest(${earlier.map((x) => x.app_id)}::uuid[], ${earlier.map((x) => x.id)}::uuid[]) AS o(app_id, id) ON e.app_id = o.app_id AND e.id = o.id
         WHERE e.id = ANY(${earlier.map((x) => x.id)}::uuid[])`),
    );
  }
  return committed.sort((a, b) => (a.app_id < b.app_id ? -1 : a.app_id > b.app_id ? 1 : a.seq - b.seq));
}

import { setTimeout as sleep } from 'node:timers/promises';
import { findOnReplica, onReplica, type ReadPools, type Sql } from '../db.js';
import { encodeCursor } from './cursor.js';
import { channelConditions, compileEventScope, type EventScope } from './event-scope.js';
import { EVENT_ALIASES, prefixNeedsAliases } from './event-types.js';
import { CREATED_AT_ISO } from './write.js';

export interface EdgeRecord {
  edge_type: string;
  target_node_type: 'platform_user' | 'file';
  target_node_id: string;
  /** The target platform user, when the edge points at one. */
  platform_user: { id: string; external_id: string; name: string | null; is_system_user: boolean; user_id: string | null } | null;
}

/** An event as read from the ledger; the faces shape it (REST names, GraphQL/stream names). */
export interface EventRecord {
  id: string;
  app_id: string;
  seq: number;
  created_at: string;
  event_type: string;
  /** The other name it also answers to (eventAlias); matched by filters, not shown by the faces. */
  event_alias: string | null;
  /** The tags it was written with (src/ledger/event-scope.ts). */
  channels: string[];
  payload: Record<string, unknown>;
  attachments: unknown[];
  origin_event_id: string | null;
  conversation_id: string | null;
  platform_connection_id: string | null;
  validation_errors: unknown[] | null;
  edges: EdgeRecord[];
  cursor: string;
}

export interface EventFilters {
  /** Only events after this ledger position (a decoded cursor's seq). */
  afterSeq?: number;
  /** Only events before this ledger position (for reading backwards with `descending`). */
  beforeSeq?: number;
  /** Newest first (a stream's recent backfill); cursor order otherwise. */
  descending?: boolean;
  eventType?: { equals?: string; startsWith?: string };
  payload?: { path: string; equals?: unknown; gt?: number; gte?: number; lt?: number; lte?: number };
  hasEdge?: { edgeType?: string; targetNodeId?: string };
  conversationId?: string;
  /** Events with an edge to this platform user or to any platform user of this user (or of its survivor, once merged). */
  userId?: string;
  /** Events on any of these channels. */
  channels?: string[];
  /**
   * The reader's confinement (a scoped portal session): its channels narrow the query; its
   * type patterns do not (SQL has no fnmatch), so use readEventPage, which applies the whole rule.
   */
  scope?: EventScope;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** `a.b.c` → a jsonpath `$."a"."b"."c"` with each segment quoted, so no input is parsed as syntax. */
function jsonPath(path: string): string {
  return `$${path
    .split('.')
    .map((seg) => `."${seg.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`)
    .join('')}`;
}

const escapeLike = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * One page of an application's ledger in cursor order. Every query is scoped by app_id and
 * index-backed: (app_id, seq) for paging, (app_id, event_type, seq) and (app_id, event_alias, seq) for type filters,
 * event_edges(app_id, target_node_id, edge_type, event_seq) for edge filters.
 */
export async function listEvents(sql: Sql, appId: string, filters: EventFilters, limit: number): Promise<EventRecord[]> {
  const f = filters;
  const conds = [sql`e.app_id = ${appId}`];
  if (f.afterSeq !== undefined) conds.push(sql`e.seq > ${f.afterSeq}`);
  if (f.beforeSeq !== undefined) conds.push(sql`e.seq < ${f.beforeSeq}`);
  if (f.eventType?.equals !== undefined) {
    // An alias is never a stored type (aliases are under reserved prefixes, and not in the
    // catalog), so a name is looked up in one column: each has its own index.
    const name = f.eventType.equals;
    conds.push(EVENT_ALIASES.has(name) ? sql`e.event_alias = ${name}` : sql`e.event_type = ${name}`);
  }
  if (f.eventType?.startsWith !== undefined) {
    const like = `${escapeLike(f.eventType.startsWith)}%`;
    conds.push(
      prefixNeedsAliases(f.eventType.startsWith)
        ? sql`(e.event_type LIKE ${like} OR e.event_alias LIKE ${like})`
        : sql`e.event_type LIKE ${like}`,
    );
  }
  conds.push(...channelConditions(sql, 'e', f.channels ? { channels: f.channels } : undefined, f.scope));
  if (f.conversationId !== undefined) {
    if (!UUID.test(f.conversationId)) return [];
    conds.push(sql`e.conversation_id = ${f.conversationId}`);
  }
  if (f.payload) {
    const ops: [string, unknown][] = [];
    if (f.payload.equals !== undefined) ops.push(['==', f.payload.equals]);
    if (f.payload.gt !== undefined) ops.push(['>', f.payload.gt]);
    if (f.payload.gte !== undefined) ops.push(['>=', f.payload.gte]);
    if (f.payload.lt !== undefined) ops.push(['<', f.payload.lt]);
    if (f.payload.lte !== undefined) ops.push(['<=', f.payload.lte]);
    const path = jsonPath(f.payload.path);
    if (ops.length === 0) conds.push(sql`jsonb_path_exists(e.payload, ${path}::jsonpath)`);
    ops.forEach(([op, value], i) => {
      conds.push(sql`jsonb_path_exists(e.payload, ${`${path} ? (@ ${op} $v${i})`}::jsonpath, ${sql.json({ [`v${i}`]: value } as never)})`);
    });
  }
  if (f.hasEdge) {
    const target = f.hasEdge.targetNodeId;
    if (target !== undefined && !UUID.test(target)) return [];
    // An edge to a platform user also matches through the user it belongs to, and a merged-away
    // user's id through its survivor (resolve_user_id, migration 030): identity follows merges.
    conds.push(sql`EXISTS (
      SELECT 1 FROM event_edges x
       WHERE x.event_id = e.id AND x.app_id = ${appId}
         ${f.hasEdge.edgeType !== undefined ? sql`AND x.edge_type = ${f.hasEdge.edgeType}` : sql``}
         ${target !== undefined ? sql`AND (x.target_node_id = ${target} OR x.target_node_id IN (SELECT pu.id FROM platform_users pu WHERE pu.app_id = ${appId} AND pu.user_id = resolve_user_id(${appId}, ${target})))` : sql``})`);
  }
  if (f.userId !== undefined) {
    if (!UUID.test(f.userId)) return [];
    conds.push(sql`EXISTS (
      SELECT 1 FROM event_edges x
       WHERE x.event_id = e.id AND x.app_id = ${appId} AND x.target_node_type = 'platform_user'
         AND (x.target_node_id = ${f.userId} OR x.target_node_id IN (SELECT pu.id FROM platform_users pu WHERE pu.app_id = ${appId} AND pu.user_id = resolve_user_id(${appId}, ${f.userId}))))`);
  }
  const where = conds.reduce((acc, c) => sql`${acc} AND ${c}`);
  const rows = await sql<Omit<EventRecord, 'edges' | 'cursor'>[]>`
    SELECT e.id, e.app_id, e.seq, ${sql.unsafe(CREATED_AT_ISO.replace('created_at', 'e.created_at'))} AS created_at,
           e.event_type, e.event_alias, e.channels, e.payload, e.attachments, e.origin_event_id, e.conversation_id,
           e.platform_connection_id, e.validation_errors
      FROM events e
     WHERE ${where}
     ORDER BY e.seq ${f.descending ? sql`DESC` : sql``}
     LIMIT ${limit}`;
  return withEdges(sql, appId, rows);
}

/**
 * One page of the ledger as a confined reader sees it: `limit` events are read, those outside
 * `filters.scope` dropped (so a page may come back short), and `next` is the last one read,
 * whether it matched or not, so paging from it skips nothing and repeats nothing.
 *
 * Read on the replica unless it is behind the page's cursor (then on the primary, at once): a
 * client holding a position has seen it committed, and a page read behind it would come back
 * empty (`afterSeq`) or miss events (`beforeSeq`).
 */
export async function readEventPage(
  pools: ReadPools,
  appId: string,
  filters: EventFilters,
  limit: number,
): Promise<{ data: EventRecord[]; next?: EventRecord; hasMore: boolean }> {
  const seen = Math.max(filters.afterSeq ?? 0, (filters.beforeSeq ?? 1) - 1);
  const rows = await readThrough(pools, appId, seen, 0, (sql) => listEvents(sql, appId, filters, limit + 1));
  const read = rows.slice(0, limit);
  const inScope = compileEventScope(filters.scope);
  return { data: read.filter(inScope), next: read.at(-1), hasMore: rows.length > limit };
}

/** One event by id; outside `scope` it is not found, exactly as another application's. */
export async function getEvent(sql: Sql, appId: string, id: string, scope?: EventScope): Promise<EventRecord | undefined> {
  if (!UUID.test(id)) return undefined;
  const rows = await sql<Omit<EventRecord, 'edges' | 'cursor'>[]>`
    SELECT id, app_id, seq, ${sql.unsafe(CREATED_AT_ISO)} AS created_at, event_type, event_alias, channels, payload, attachments,
           origin_event_id, conversation_id, platform_connection_id, validation_errors
      FROM events WHERE app_id = ${appId} AND id = ${id}`;
  const [event] = await withEdges(sql, appId, rows);
  return event && compileEventScope(scope)(event) ? event : undefined;
}

/** `getEvent` on the replica, and on the primary when the replica does not have it (yet). */
export const findEvent = (pools: ReadPools, appId: string, id: string, scope?: EventScope) =>
  findOnReplica(pools, (sql) => getEvent(sql, appId, id, scope));

/** The application's current head position (0 for an empty ledger). */
export async function headSeq(sql: Sql, appId: string): Promise<number> {
  const [row] = await sql<{ seq: number }[]>`SELECT seq FROM ledger_heads WHERE app_id = ${appId}`;
  return row?.seq ?? 0;
}

/** How often a reader waiting for the replica asks it again (ms). */
const REPLAY_POLL_MS = 20;

/**
 * Runs `read` (a read of `appId`'s ledger) where it sees every event up to position `seq`: on
 * the replica once it has replayed `seq` — asked again for at most `waitMs` — else on the
 * primary. A replica replays commits in their order, and the ledger hands out an application's
 * positions in commit order, so whatever it has of the ledger is a gap-free prefix: a read there
 * can come back short, never with a hole. Positions a reader knows were committed (a wake's, the
 * tail's, a client's cursor) are what it must not read behind, lest it wait forever for them.
 */
export async function readThrough<T>(
  pools: ReadPools,
  appId: string,
  seq: number,
  waitMs: number,
  read: (sql: Sql) => Promise<T>,
): Promise<T> {
  const deadline = Date.now() + waitMs;
  const source = await onReplica(pools, async (sql) => {
    if (sql === pools.sql || seq <= 0) return sql;
    while ((await headSeq(sql, appId)) < seq) {
      if (Date.now() >= deadline) return pools.sql;
      await sleep(Math.min(REPLAY_POLL_MS, deadline - Date.now()));
    }
    return sql;
  });
  return source === pools.sql ? read(source) : onReplica(pools, read);
}

async function withEdges(sql: Sql, appId: string, rows: Omit<EventRecord, 'edges' | 'cursor'>[]): Promise<EventRecord[]> {
  if (rows.length === 0) return [];
  const edges = await sql<
    (EdgeRecord & {
      event_id: string;
      pu_id: string | null;
      pu_external_id: string | null;
      pu_name: string | null;
      pu_system: boolean | null;
      pu_user_id: string | null;
    })[]
  >`
    SELECT x.event_id, x.edge_type, x.target_node_type, x.target_node_id,
           pu.id AS pu_id, pu.external_id AS pu_external_id, pu.name AS pu_name,
           pu.is_system_user AS pu_system, pu.user_id AS pu_user_id
      FROM event_edges x
      LEFT JOIN platform_users pu ON x.target_node_type = 'platform_user' AND pu.id = x.target_node_id AND pu.app_id = ${appId}
     WHERE x.app_id = ${appId} AND x.event_id = ANY(${rows.map((r) => r.id)}::uuid[])
     ORDER BY x.event_id, x.ord`;
  const byEvent = new Map<string, EdgeRecord[]>();
  for (const x of edges) {
    const list = byEvent.get(x.event_id) ?? [];
    list.push({
      edge_type: x.edge_type,
      target_node_type: x.target_node_type,
      target_node_id: x.target_node_id,
      platform_user: x.pu_id
        ? { id: x.pu_id, external_id: x.pu_external_id!, name: x.pu_name, is_system_user: Boolean(x.pu_system), user_id: x.pu_user_id }
        : null,
    });
    byEvent.set(x.event_id, list);
  }
  return rows.map((r) => ({
    ...r,
    edges: byEvent.get(r.id) ?? [],
    cursor: encodeCursor({ seq: r.seq, createdAt: r.created_at, id: r.id }),
  }));
}

import { z } from 'zod';
import { compileEventTypePatterns, EVENT_PATTERN_RE } from '../ledger/event-type-match.js';
import type { Sql } from '../db.js';
import type { EventFilters, EventRecord } from '../ledger/read.js';

const MAX_PATTERNS = 50;
const uuid = z
  .string()
  .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, 'must be a UUID')
  .transform((s) => s.toLowerCase());
const pattern = z.string().min(1).max(200).regex(EVENT_PATTERN_RE, 'an event type or an fnmatch pattern such as message.*');

/** What a stream (SSE or GraphQL) selects; every field present must hold (AND). */
export const streamFilterSchema = z.object({
  eventTypes: z.array(pattern).min(1).max(MAX_PATTERNS).optional(),
  userId: uuid.optional(),
  conversationId: uuid.optional(),
});
export type StreamFilter = z.infer<typeof streamFilterSchema>;

/** The SSE endpoint's query string: `eventTypes` is comma-separated there. */
export const streamQuerySchema = z
  .object({
    eventTypes: z.string().max(5000).optional(),
    userId: z.string().optional(),
    conversationId: z.string().optional(),
    lastEventId: z.string().optional(),
  })
  .transform((q, ctx) => {
    const types = q.eventTypes?.split(',').map((p) => p.trim()).filter(Boolean);
    const parsed = streamFilterSchema.safeParse({
      eventTypes: types && types.length > 0 ? types : undefined,
      userId: q.userId || undefined,
      conversationId: q.conversationId || undefined,
    });
    if (!parsed.success) {
      for (const issue of parsed.error.issues) ctx.addIssue({ ...issue, code: 'custom', message: issue.message });
      return z.NEVER;
    }
    return { filter: parsed.data, lastEventId: q.lastEventId || undefined };
  });

/**
 * What a `userId` filter stands for: the id as given (a platform user's id matches its own
 * edges) and the live user it resolves to through merges (that user's platform users match).
 */
export interface UserMatch {
  given: string;
  /** Null when the id is no user of the application (it may still be a platform user id). */
  user: string | null;
}

/** Resolves a `userId` filter when a stream starts, with the same rule as the ledger's SQL filter. */
export async function resolveUserMatch(sql: Sql, appId: string, userId: string): Promise<UserMatch> {
  const [row] = await sql<{ id: string | null }[]>`SELECT resolve_user_id(${appId}, ${userId}) AS id`;
  return { given: userId, user: row?.id ?? null };
}

/** A `user.merged` event whose source is the followed user moves the match to the survivor, as the merge moved its platform users. */
function followMerge(event: EventRecord, m: UserMatch): void {
  if (event.event_type !== 'user.merged' || m.user === null || event.payload.source_user_id !== m.user) return;
  const target = event.payload.target_user_id;
  if (typeof target === 'string') m.user = target;
}

/**
 * Does the event involve this user? An edge to the platform user itself, or to any platform
 * user that belongs to the user (`platform_users.user_id`, as read with the event's edges).
 * The one place the stream decides "involves a user".
 */
export function eventInvolvesUser(event: EventRecord, m: UserMatch): boolean {
  return event.edges.some(
    (x) => x.target_node_type === 'platform_user' && (x.target_node_id === m.given || (m.user !== null && x.platform_user?.user_id === m.user)),
  );
}

export interface CompiledStreamFilter {
  /** Fed each event of the stream once, in ledger order (it follows merges as they pass). */
  matches(event: EventRecord): boolean;
  /** Re-resolves the user through merges; catch-up calls it before each ledger query so both agree. */
  refresh(): Promise<void>;
}

/**
 * The filter as one predicate over ledger events: the truth both catch-up and the live tail
 * apply. Built once per stream: it keeps the stream's user match, so a stream open across a
 * merge of its user keeps following the person.
 */
export async function compileStreamFilter(sql: Sql, appId: string, f: StreamFilter): Promise<CompiledStreamFilter> {
  const types = f.eventTypes ? compileEventTypePatterns(f.eventTypes) : undefined;
  let user = f.userId !== undefined ? await resolveUserMatch(sql, appId, f.userId) : undefined;
  return {
    matches(e) {
      if (user) followMerge(e, user);
      return (
        (types === undefined || types(e.event_type)) &&
        (f.conversationId === undefined || e.conversation_id === f.conversationId) &&
        (user === undefined || eventInvolvesUser(e, user))
      );
    },
    async refresh() {
      if (f.userId !== undefined) user = await resolveUserMatch(sql, appId, f.userId);
    },
  };
}

/**
 * Index-backed narrowing for catch-up and backfill queries: it may return more than the
 * filter matches (the predicate above decides), never less. Event-type patterns narrow to
 * their common literal prefix (`message.*` → `message.`), which the type index serves.
 */
export function sqlPrefilter(f: StreamFilter): EventFilters {
  const out: EventFilters = {};
  if (f.conversationId) out.conversationId = f.conversationId;
  if (f.userId) out.userId = f.userId;
  // With a user filter, user.merged events must reach the predicate whatever their type, and
  // the user narrowing is selective on its own.
  if (f.eventTypes && !f.userId) {
    const prefixes = f.eventTypes.map((p) => p.split(/[*?[]/, 1)[0]);
    let common = prefixes[0];
    for (const p of prefixes) while (!p.startsWith(common)) common = common.slice(0, -1);
    if (common) out.eventType = { startsWith: common };
  }
  return out;
}

import { z } from 'zod';
import { channelsSchema, compileEventScope, type EventScope } from '../ledger/event-scope.js';
import { compileEventTypePatterns, eventPatternSchema } from '../ledger/event-type-match.js';
import type { EventFilters, EventRecord } from '../ledger/read.js';
import type { UserScope } from '../identity/user-scope.js';

const MAX_PATTERNS = 50;
const uuid = z
  .string()
  .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, 'must be a UUID')
  .transform((s) => s.toLowerCase());
const pattern = eventPatternSchema;

/** What a stream (SSE or GraphQL) selects; every field present must hold (AND). */
export const streamFilterSchema = z.object({
  eventTypes: z.array(pattern).min(1).max(MAX_PATTERNS).optional(),
  userId: uuid.optional(),
  conversationId: uuid.optional(),
  channels: channelsSchema.pipe(z.array(z.string()).min(1)).optional(),
});
/** A stream's filter, and the confinement of the credential that opened it (never from the request). */
export type StreamFilter = z.infer<typeof streamFilterSchema> & { scope?: EventScope };

/** The SSE endpoint's query string: `eventTypes` is comma-separated there. */
export const streamQuerySchema = z
  .strictObject({
    eventTypes: z.string().max(5000).optional(),
    userId: z.string().optional(),
    conversationId: z.string().optional(),
    channels: z.string().max(1400).optional(),
    lastEventId: z.string().optional(),
  })
  .transform((q, ctx) => {
    const types = q.eventTypes
      ?.split(',')
      .map((p) => p.trim())
      .filter(Boolean);
    const parsed = streamFilterSchema.safeParse({
      eventTypes: types && types.length > 0 ? types : undefined,
      userId: q.userId || undefined,
      conversationId: q.conversationId || undefined,
      channels: q.channels ? q.channels.split(',').map((c) => c.trim()) : undefined,
    });
    if (!parsed.success) {
      for (const issue of parsed.error.issues) ctx.addIssue({ ...issue, code: 'custom', message: issue.message });
      return z.NEVER;
    }
    return { filter: parsed.data, lastEventId: q.lastEventId || undefined };
  });

/**
 * The filter as one predicate over ledger events: the truth both catch-up and the live tail
 * apply. "Involves the user" is the identity rule of src/identity/user-scope.ts (a user, its
 * platform users, and whoever it merges with); `user` is the scope of `f.userId`.
 */
export function compileStreamFilter(f: StreamFilter, user?: UserScope): (event: EventRecord) => boolean {
  const types = f.eventTypes ? compileEventTypePatterns(f.eventTypes) : undefined;
  const inScope = compileEventScope(f.channels && { channels: f.channels }, f.scope);
  if (f.userId !== undefined && !user) throw new Error('a userId filter needs its UserScope');
  return (e) => {
    // The scope sees every event first, so it learns of merges even from events the other filters reject.
    const involved = user === undefined || user.involves(e);
    return (
      involved &&
      inScope(e) &&
      (types === undefined || types(e)) &&
      (f.conversationId === undefined || e.conversation_id === f.conversationId)
    );
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
  // Channels narrow by index too, except under a user filter (user.merged events carry none).
  else {
    out.channels = f.channels;
    out.scope = f.scope;
  }
  // With a user filter, user.merged events must reach the user scope whatever the type filter
  // (it learns merges from them), and the user narrowing is selective on its own.
  if (f.eventTypes && !f.userId) {
    const prefixes = f.eventTypes.map((p) => p.split(/[*?[]/, 1)[0]);
    let common = prefixes[0];
    for (const p of prefixes) while (!p.startsWith(common)) common = common.slice(0, -1);
    if (common) out.eventType = { startsWith: common };
  }
  return out;
}

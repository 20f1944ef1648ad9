import type postgres from 'postgres';
import { z } from 'zod';
import type { Sql } from '../db.js';
import { fail, ok, type Result } from '../errors.js';
import { isoOf, isUuid, resolveUserId } from '../identity/users.js';
import { getEvent, type EventRecord } from '../ledger/read.js';
import { decodePageCursor, toPage } from '../pagination/page-cursor.js';
import { replyWindow, type ReplyWindow } from './reply-window.js';

export const PAGE_KIND_CONVERSATIONS = 'conversations';

export const listConversationsInput = z.strictObject({
  platform_connection_id: z.uuid().optional(),
  /** Conversations any platform user of this user took part in (a merged-away id: its survivor's). */
  user_id: z.uuid().optional(),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  after: z.string().max(200).optional(),
});
export type ListConversationsInput = z.infer<typeof listConversationsInput>;

export interface ParticipantView {
  platform_user_id: string;
  user_id: string;
  platform: string;
  external_id: string;
  name: string | null;
  is_system_user: boolean;
  first_seen_at: string;
  last_seen_at: string;
}

export interface ConversationView {
  id: string;
  platform_connection_id: string;
  /** Lower-case platform name, as in event payloads. */
  platform: string;
  external_id: string;
  thread_id: string | null;
  name: string | null;
  created_at: string;
  last_event_id: string | null;
  last_event_at: string | null;
  reply_window: ReplyWindow;
}

export interface ConversationDetail extends ConversationView {
  participants: ParticipantView[];
  last_event: EventRecord | null;
}

interface Row {
  id: string;
  platform_connection_id: string;
  platform: string;
  external_id: string;
  thread_id: string;
  name: string | null;
  created_at: string;
  last_inbound_at: Date | null;
  last_event_id: string | null;
  last_event_at: string | null;
}

const toView = (r: Row, now: number): ConversationView => ({
  id: r.id,
  platform_connection_id: r.platform_connection_id,
  platform: r.platform.toLowerCase(),
  external_id: r.external_id,
  thread_id: r.thread_id === '' ? null : r.thread_id,
  name: r.name,
  created_at: r.created_at,
  last_event_id: r.last_event_id,
  last_event_at: r.last_event_at,
  reply_window: replyWindow(r.platform, r.external_id, r.last_inbound_at, now),
});

/** The columns of a conversation row; the last event comes from events(app_id, conversation_id, seq). */
function selectRows(sql: Sql, appId: string, where: postgres.Fragment, limit: number) {
  return sql<Row[]>`
    SELECT c.id, c.platform_connection_id, pc.platform, c.external_id, c.thread_id, c.name,
           ${sql.unsafe(isoOf('c.created_at'))} AS created_at, c.last_inbound_at,
           le.id AS last_event_id, ${sql.unsafe(isoOf('le.created_at'))} AS last_event_at
      FROM conversations c
      JOIN platform_connections pc ON pc.id = c.platform_connection_id AND pc.app_id = ${appId}
      LEFT JOIN LATERAL (
        SELECT e.id, e.created_at FROM events e
         WHERE e.app_id = ${appId} AND e.conversation_id = c.id
         ORDER BY e.seq DESC LIMIT 1
      ) le ON true
     WHERE ${where}
     ORDER BY c.created_at, c.id
     LIMIT ${limit}`;
}

/** A page of the application's conversations, oldest first. */
export async function listConversations(
  sql: Sql,
  appId: string,
  input: ListConversationsInput,
): Promise<Result<{ conversations: ConversationView[]; nextCursor: string | null; hasMore: boolean }>> {
  const after = input.after !== undefined ? decodePageCursor(PAGE_KIND_CONVERSATIONS, input.after) : undefined;
  if (after && !after.ok) return after;
  const conds = [sql`c.app_id = ${appId}`];
  if (after) conds.push(sql`(c.created_at, c.id) > (${after.value.at}::text::timestamptz, ${after.value.id}::uuid)`);
  if (input.platform_connection_id !== undefined) conds.push(sql`c.platform_connection_id = ${input.platform_connection_id}`);
  if (input.user_id !== undefined) {
    const userId = await resolveUserId(sql, appId, input.user_id);
    if (!userId) return ok({ conversations: [], nextCursor: null, hasMore: false });
    conds.push(sql`c.id IN (
      SELECT cp.conversation_id FROM conversation_participants cp
       WHERE cp.app_id = ${appId}
         AND cp.platform_user_id IN (SELECT pu.id FROM platform_users pu WHERE pu.app_id = ${appId} AND pu.user_id = ${userId}))`);
  }
  const where = conds.reduce((acc, c) => sql`${acc} AND ${c}`);
  const rows = await selectRows(sql, appId, where, input.limit + 1);
  const page = toPage(PAGE_KIND_CONVERSATIONS, rows, input.limit, (r) => ({ at: r.created_at, id: r.id }));
  const now = Date.now();
  return ok({ conversations: page.rows.map((r) => toView(r, now)), nextCursor: page.nextCursor, hasMore: page.hasMore });
}

/** Participants of a conversation (people first, then the connected account), each with the user it belongs to now (identity follows merges). */
export async function participantsOf(sql: Sql, appId: string, conversationId: string): Promise<ParticipantView[]> {
  return sql<ParticipantView[]>`
    SELECT pu.id AS platform_user_id, pu.user_id, lower(pu.platform) AS platform, pu.external_id, pu.name, pu.is_system_user,
           ${sql.unsafe(isoOf('cp.first_seen_at'))} AS first_seen_at, ${sql.unsafe(isoOf('cp.last_seen_at'))} AS last_seen_at
      FROM conversation_participants cp
      JOIN platform_users pu ON pu.id = cp.platform_user_id AND pu.app_id = ${appId}
     WHERE cp.app_id = ${appId} AND cp.conversation_id = ${conversationId}
     ORDER BY pu.is_system_user, cp.first_seen_at, pu.id`;
}

/** One conversation with its participants, last event and reply-window state. */
export async function getConversation(sql: Sql, appId: string, id: string): Promise<Result<ConversationDetail>> {
  const notFound = fail('NOT_FOUND', `No conversation ${id}`, [{ path: ['id'], message: 'not found' }]);
  if (!isUuid(id)) return notFound;
  const [row] = await selectRows(sql, appId, sql`c.app_id = ${appId} AND c.id = ${id}`, 1);
  if (!row) return notFound;
  const [participants, lastEvent] = await Promise.all([
    participantsOf(sql, appId, row.id),
    row.last_event_id ? getEvent(sql, appId, row.last_event_id) : Promise.resolve(undefined),
  ]);
  return ok({ ...toView(row, Date.now()), participants, last_event: lastEvent ?? null });
}

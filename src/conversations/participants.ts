import { typed, type Sql } from '../db.js';
import type { Deps } from '../deps.js';
import type { CommittedEvent } from '../ledger/write.js';
import { byApp } from '../per-app.js';

/**
 * Ledger after-commit hook: everyone an event of a conversation points at (its platform-user
 * edges: sender, recipient, the connected account) becomes a participant of that conversation.
 * Idempotent (a retried batch only re-asserts the same rows), and written in key order so two
 * workers' batches never deadlock on the same participants. One statement per application:
 * none locks rows of several (docs/SCALING.md, Citus).
 */
export async function recordParticipants(deps: Deps, committed: CommittedEvent[]): Promise<void> {
  await Promise.all(
    byApp(committed.filter((c) => c.conversation_id !== null)).map(
      ([appId, events]) => deps.sql`
        INSERT INTO conversation_participants (conversation_id, platform_user_id, app_id, first_seen_at, last_seen_at)
        SELECT e.conversation_id, x.target_node_id, e.app_id, min(e.created_at), max(e.created_at)
          FROM events e JOIN event_edges x ON x.app_id = e.app_id AND x.event_id = e.id
         WHERE e.app_id = ${appId} AND e.id = ANY(${events.map((c) => c.id)}::uuid[])
           AND x.app_id = ${appId} AND x.event_id = ANY(${events.map((c) => c.id)}::uuid[])
           AND e.conversation_id IS NOT NULL AND x.target_node_type = 'platform_user'
         GROUP BY e.conversation_id, x.target_node_id, e.app_id
         ORDER BY e.conversation_id, x.target_node_id
        ${seenAgain(deps.sql)}`,
    ),
  );
}

/** A participant seen again widens its first/last seen, and writes nothing when neither moves. */
const seenAgain = (sql: Sql) => sql`
    ON CONFLICT (app_id, conversation_id, platform_user_id) DO UPDATE
       SET first_seen_at = LEAST(conversation_participants.first_seen_at, EXCLUDED.first_seen_at),
           last_seen_at = GREATEST(conversation_participants.last_seen_at, EXCLUDED.last_seen_at)
     WHERE EXCLUDED.last_seen_at > conversation_participants.last_seen_at
        OR EXCLUDED.first_seen_at < conversation_participants.first_seen_at`;

/**
 * The same as a CTE of the ledger's guarded write (src/ledger/write.ts, writeGuardedEvents),
 * from participants the caller already knows (the send path knows each event's parties): no
 * read of the ledger, and the participants commit with their events. `ins` is that write's
 * inserted events.
 */
export function participantsOfInserted(
  sql: Sql,
  appId: string,
  seen: { event_id: string; conversation_id: string; platform_user_id: string }[],
) {
  return sql`
    participants AS (
      INSERT INTO conversation_participants (conversation_id, platform_user_id, app_id, first_seen_at, last_seen_at)
      SELECT p.conversation_id, p.platform_user_id, ${typed.uuid(sql, appId)}, min(ins.created_at), max(ins.created_at)
        FROM jsonb_to_recordset(${typed.text(sql, JSON.stringify(seen))}::jsonb) AS p(event_id uuid, conversation_id uuid, platform_user_id uuid)
        JOIN ins ON ins.id = p.event_id
       GROUP BY p.conversation_id, p.platform_user_id
       ORDER BY p.conversation_id, p.platform_user_id
      ${seenAgain(sql)}
    )`;
}

import type { Deps } from '../deps.js';
import type { CommittedEvent } from '../ledger/write.js';

/**
 * Ledger after-commit hook: everyone an event of a conversation points at (its platform-user
 * edges: sender, recipient, the connected account) becomes a participant of that conversation.
 * Idempotent (a retried batch only re-asserts the same rows), and written in key order so two
 * workers' batches never deadlock on the same participants.
 */
export async function recordParticipants(deps: Deps, committed: CommittedEvent[]): Promise<void> {
  const inConversations = committed.filter((c) => c.conversation_id !== null).map((c) => c.id);
  if (inConversations.length === 0) return;
  await deps.sql`
    INSERT INTO conversation_participants (conversation_id, platform_user_id, app_id, first_seen_at, last_seen_at)
    SELECT e.conversation_id, x.target_node_id, e.app_id, min(e.created_at), max(e.created_at)
      FROM events e JOIN event_edges x ON x.event_id = e.id
     WHERE e.id = ANY(${inConversations}::uuid[])
       AND e.conversation_id IS NOT NULL AND x.target_node_type = 'platform_user'
     GROUP BY e.conversation_id, x.target_node_id, e.app_id
     ORDER BY e.conversation_id, x.target_node_id
    ON CONFLICT (conversation_id, platform_user_id) DO UPDATE
       SET first_seen_at = LEAST(conversation_participants.first_seen_at, EXCLUDED.first_seen_at),
           last_seen_at = GREATEST(conversation_participants.last_seen_at, EXCLUDED.last_seen_at)
     WHERE EXCLUDED.last_seen_at > conversation_participants.last_seen_at
        OR EXCLUDED.first_seen_at < conversation_participants.first_seen_at`;
}

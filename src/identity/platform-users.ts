import { randomUUID } from 'node:crypto';
import { transaction, type Sql } from '../db.js';

export interface PlatformUserRef {
  id: string;
  user_id: string;
  external_id: string;
  name: string | null;
}

/**
 * Finds or creates the platform user for (connection, external id), and on first sight the
 * user it belongs to, in the same transaction: a platform user never exists without its user.
 * Safe under concurrency: two first sights race on the platform user's unique key; the loser's
 * ON CONFLICT waits for the winner's commit and returns the winner's row, and the loser drops
 * the user it created before anyone could see it — one platform user, one user.
 */
export async function upsertPlatformUser(
  sql: Sql,
  p: { appId: string; connectionId: string; platform: string; externalId: string; name?: string | null; isSystem?: boolean },
): Promise<PlatformUserRef> {
  const name = p.name ?? null;
  // Every message after the first takes this path: one index probe, no write unless the name changed.
  const [seen] = await sql<PlatformUserRef[]>`
    SELECT id, user_id, external_id, name FROM platform_users
     WHERE app_id = ${p.appId} AND platform_connection_id = ${p.connectionId} AND external_id = ${p.externalId}`;
  if (seen) {
    if (name === null || seen.name === name) return seen;
    await sql`UPDATE platform_users SET name = ${name} WHERE id = ${seen.id}`;
    return { ...seen, name };
  }
  return transaction(sql, async (tx) => {
    const userId = randomUUID();
    await tx`INSERT INTO users (id, app_id, name, is_system) VALUES (${userId}, ${p.appId}, ${name}, ${p.isSystem ?? false})`;
    const [row] = await tx<PlatformUserRef[]>`
      INSERT INTO platform_users (app_id, platform_connection_id, platform, external_id, name, is_system_user, user_id)
      VALUES (${p.appId}, ${p.connectionId}, ${p.platform}, ${p.externalId}, ${name}, ${p.isSystem ?? false}, ${userId})
      ON CONFLICT (app_id, platform_connection_id, external_id)
      DO UPDATE SET name = COALESCE(EXCLUDED.name, platform_users.name)
      RETURNING id, user_id, external_id, name`;
    if (row.user_id !== userId) await tx`DELETE FROM users WHERE id = ${userId}`;
    return row;
  }) as Promise<PlatformUserRef>;
}

/** Finds or creates a conversation (connection + chat/channel [+ thread]). */
export async function upsertConversation(
  sql: Sql,
  c: { appId: string; connectionId: string; externalId: string; threadId?: string | null; name?: string | null; inboundAt?: Date | null },
): Promise<string> {
  const [row] = await sql<{ id: string }[]>`
    INSERT INTO conversations (app_id, platform_connection_id, external_id, thread_id, name, last_inbound_at)
    VALUES (${c.appId}, ${c.connectionId}, ${c.externalId}, ${c.threadId ?? ''}, ${c.name ?? null}, ${c.inboundAt ?? null})
    ON CONFLICT (platform_connection_id, external_id, thread_id)
    DO UPDATE SET name = COALESCE(EXCLUDED.name, conversations.name),
                  last_inbound_at = GREATEST(conversations.last_inbound_at, EXCLUDED.last_inbound_at)
    RETURNING id`;
  return row.id;
}

import { transaction, type Sql } from '../db.js';

export interface PlatformUserRef {
  id: string;
  user_id: string;
  external_id: string;
  name: string | null;
}

/**
 * Finds or creates the platform user for (connection, external id), and the user it belongs
 * to on first sight. Safe under concurrency: the upsert locks the row until commit, so a
 * second caller waits and finds the user already attached — one platform user, one user.
 */
export async function upsertPlatformUser(
  sql: Sql,
  p: { appId: string; connectionId: string; platform: string; externalId: string; name?: string | null; isSystem?: boolean },
): Promise<PlatformUserRef> {
  return transaction(sql, async (tx) => {
    const [row] = await tx<PlatformUserRef[]>`
      INSERT INTO platform_users (app_id, platform_connection_id, platform, external_id, name, is_system_user)
      VALUES (${p.appId}, ${p.connectionId}, ${p.platform}, ${p.externalId}, ${p.name ?? null}, ${p.isSystem ?? false})
      ON CONFLICT (app_id, platform_connection_id, external_id)
      DO UPDATE SET name = COALESCE(EXCLUDED.name, platform_users.name)
      RETURNING id, user_id, external_id, name`;
    if (row.user_id) return row;
    const [user] = await tx<{ id: string }[]>`INSERT INTO users (app_id, name) VALUES (${p.appId}, ${p.name ?? null}) RETURNING id`;
    await tx`UPDATE platform_users SET user_id = ${user.id} WHERE id = ${row.id}`;
    return { ...row, user_id: user.id };
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

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
    await sql`UPDATE platform_users SET name = ${name} WHERE app_id = ${p.appId} AND id = ${seen.id}`;
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
    if (row.user_id !== userId) await tx`DELETE FROM users WHERE app_id = ${p.appId} AND id = ${userId}`;
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
    ON CONFLICT (app_id, platform_connection_id, external_id, thread_id)
    DO UPDATE SET name = COALESCE(EXCLUDED.name, conversations.name),
                  last_inbound_at = GREATEST(conversations.last_inbound_at, EXCLUDED.last_inbound_at)
    RETURNING id`;
  return row.id;
}

/** A platform user to find or create, as `upsertPlatformUsers` takes them. */
export interface PlatformUserKey {
  appId: string;
  connectionId: string;
  platform: string;
  externalId: string;
}

const userKey = (k: { appId: string; connectionId: string; externalId: string }) => `${k.appId}/${k.connectionId}/${k.externalId}`;
const convKey = (c: string, x: string) => `${c}/${x}`;

/** A direct conversation (no thread) to find or create. */
export interface ConversationKey {
  appId: string;
  connectionId: string;
  externalId: string;
}

/** What `upsertParties` answers: platform users keyed `appId/connectionId/externalId`, conversation ids keyed `connectionId/externalId`. */
export interface Parties {
  users: Map<string, PlatformUserRef>;
  conversations: Map<string, string>;
}

type Found = {
  kind: 'user' | 'conversation';
  id: string;
  user_id: string | null;
  external_id: string;
  name: string | null;
  app_id: string | null;
  platform_connection_id: string;
};

/**
 * Finds or creates many platform users (and each new one's user) and many direct
 * conversations in one statement: the send path's batch of recipients (never a connection's own
 * account, which `upsertPlatformUser` makes). A new platform user and its user are inserted by
 * the same statement, so one never exists without the other. A first sight racing another
 * transaction's loses on the unique key (DO NOTHING waits for the winner) and is read back
 * after. Names are not touched. Each lookup is one index probe per key (LIMIT keeps it a probe:
 * as a join, the planner, which takes the input for 100 rows, hashes the whole table while it
 * is small).
 */
export async function upsertParties(sql: Sql, userKeys: PlatformUserKey[], convKeys: ConversationKey[]): Promise<Parties> {
  const users = [...new Map(userKeys.map((k) => [userKey(k), k])).values()].sort((a, b) => (userKey(a) < userKey(b) ? -1 : 1));
  const convs = [...new Map(convKeys.map((k) => [convKey(k.connectionId, k.externalId), k])).values()].sort((a, b) =>
    convKey(a.connectionId, a.externalId) < convKey(b.connectionId, b.externalId) ? -1 : 1,
  );
  const out: Parties = { users: new Map(), conversations: new Map() };
  const collect = (rows: Found[]) => {
    for (const r of rows)
      if (r.kind === 'user')
        out.users.set(userKey({ appId: r.app_id!, connectionId: r.platform_connection_id, externalId: r.external_id }), {
          id: r.id,
          user_id: r.user_id!,
          external_id: r.external_id,
          name: r.name,
        });
      else out.conversations.set(convKey(r.platform_connection_id, r.external_id), r.id);
  };
  if (users.length === 0 && convs.length === 0) return out;
  const userInput = JSON.stringify(
    users.map((k) => ({ app_id: k.appId, conn: k.connectionId, platform: k.platform, external_id: k.externalId, user_id: randomUUID() })),
  );
  const convInput = JSON.stringify(convs.map((k) => ({ app_id: k.appId, conn: k.connectionId, external_id: k.externalId })));
  // Existing rows come from the statement's snapshot, new ones from its own inserts; the new
  // platform users' users are inserted by the same statement (the foreign key is checked at its end).
  collect(
    await sql<Found[]>`
      WITH pu_input AS (
        SELECT * FROM jsonb_to_recordset(${userInput}::text::jsonb)
          AS r(app_id uuid, conn uuid, platform text, external_id text, user_id uuid)
      ), pu_found AS (
        SELECT p.id, p.user_id, p.external_id, p.name, p.app_id, p.platform_connection_id
          FROM pu_input i CROSS JOIN LATERAL (
            SELECT * FROM platform_users p
             WHERE p.app_id = i.app_id AND p.platform_connection_id = i.conn AND p.external_id = i.external_id LIMIT 1) p
      ), pu_new AS (
        INSERT INTO platform_users (app_id, platform_connection_id, platform, external_id, is_system_user, user_id)
        SELECT i.app_id, i.conn, i.platform, i.external_id, false, i.user_id FROM pu_input i
         WHERE NOT EXISTS (SELECT 1 FROM pu_found f WHERE f.app_id = i.app_id AND f.platform_connection_id = i.conn AND f.external_id = i.external_id)
         ORDER BY i.app_id, i.conn, i.external_id
        ON CONFLICT (app_id, platform_connection_id, external_id) DO NOTHING
        RETURNING id, user_id, external_id, name, app_id, platform_connection_id
      ), pu_users AS (
        INSERT INTO users (id, app_id, name, is_system) SELECT i.user_id, i.app_id, NULL, false FROM pu_input i JOIN pu_new ON pu_new.user_id = i.user_id
      ), c_input AS (
        SELECT * FROM jsonb_to_recordset(${convInput}::text::jsonb) AS r(app_id uuid, conn uuid, external_id text)
      ), c_found AS (
        SELECT c.id, c.platform_connection_id, c.external_id
          FROM c_input i CROSS JOIN LATERAL (
            SELECT * FROM conversations c WHERE c.app_id = i.app_id AND c.platform_connection_id = i.conn AND c.external_id = i.external_id AND c.thread_id = '' LIMIT 1) c
      ), c_new AS (
        INSERT INTO conversations (app_id, platform_connection_id, external_id, thread_id)
        SELECT i.app_id, i.conn, i.external_id, '' FROM c_input i
         WHERE NOT EXISTS (SELECT 1 FROM c_found f WHERE f.platform_connection_id = i.conn AND f.external_id = i.external_id)
         ORDER BY i.conn, i.external_id
        ON CONFLICT (app_id, platform_connection_id, external_id, thread_id) DO NOTHING
        RETURNING id, platform_connection_id, external_id
      )
      SELECT 'user' AS kind, id, user_id, external_id, name, app_id, platform_connection_id FROM pu_found
      UNION ALL SELECT 'user', id, user_id, external_id, name, app_id, platform_connection_id FROM pu_new
      UNION ALL SELECT 'conversation', id, NULL, external_id, NULL, NULL, platform_connection_id FROM c_found
      UNION ALL SELECT 'conversation', id, NULL, external_id, NULL, NULL, platform_connection_id FROM c_new`,
  );
  const lostUsers = users.filter((k) => !out.users.has(userKey(k)));
  const lostConvs = convs.filter((k) => !out.conversations.has(convKey(k.connectionId, k.externalId)));
  const reread = await Promise.all([
    lostUsers.length
      ? sql<Found[]>`
          SELECT 'user' AS kind, p.id, p.user_id, p.external_id, p.name, p.app_id, p.platform_connection_id
            FROM platform_users p
            JOIN unnest(${lostUsers.map((k) => k.appId)}::uuid[], ${lostUsers.map((k) => k.connectionId)}::uuid[], ${lostUsers.map((k) => k.externalId)}::text[])
              AS k(app_id, conn, external_id) ON p.app_id = k.app_id AND p.platform_connection_id = k.conn AND p.external_id = k.external_id`
      : [],
    lostConvs.length
      ? sql<Found[]>`
          SELECT 'conversation' AS kind, c.id, NULL AS user_id, c.external_id, NULL AS name, NULL AS app_id, c.platform_connection_id
            FROM conversations c
            JOIN unnest(${lostConvs.map((k) => k.appId)}::uuid[], ${lostConvs.map((k) => k.connectionId)}::uuid[], ${lostConvs.map((k) => k.externalId)}::text[])
              AS k(app_id, conn, external_id) ON c.app_id = k.app_id AND c.platform_connection_id = k.conn AND c.external_id = k.external_id AND c.thread_id = ''`
      : [],
  ]);
  for (const rows of reread) collect(rows as Found[]);
  return out;
}

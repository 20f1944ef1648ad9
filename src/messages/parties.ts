import type { ConnectionCache } from '../connections/connection-cache.js';
import type { Connection } from '../connections/connections.js';
import type { Deps } from '../deps.js';
import { upsertParties, upsertPlatformUser, type PlatformUserRef } from '../identity/platform-users.js';
import { lookupCache } from '../lookup-cache.js';
import { getAdapter } from '../platforms/registry.js';
import type { MessageRow } from './messages.js';

/** Who a send's events point at: its recipient, the connection's own account and their conversation. */
export interface SendParties {
  recipient: PlatformUserRef;
  system: PlatformUserRef;
  conversationId: string;
}

export interface PartyResolver {
  /** The parties of each send, in order: created on first sight, from memory on repeats. */
  resolve(sends: { msg: MessageRow; conn: Connection }[]): Promise<SendParties[]>;
}

/** How long a recipient's platform user and conversation are remembered (ms). */
const PARTY_CACHE_MS = 60_000;
const PARTY_CACHE_MAX = 50_000;

/**
 * The parties of a batch of sends in at most two statements (recipients with their
 * conversations and, once per connection, its system user), and none for a recipient seen recently: a
 * conversation's messages go to the same person again and again. Platform users and
 * conversations are never deleted but with their connection, whose change clears the memory.
 */
export function createPartyResolver(deps: Deps, connections: ConnectionCache): PartyResolver {
  const recipients = new Map<string, { ref: PlatformUserRef; until: number }>();
  const conversations = new Map<string, { id: string; until: number }>();
  const systems = lookupCache<PlatformUserRef>(PARTY_CACHE_MS);
  connections.onChange(() => {
    recipients.clear();
    conversations.clear();
    systems.clear();
  });
  const fresh = <V extends { until: number }>(m: Map<string, V>, key: string, now: number) => {
    const hit = m.get(key);
    return hit && hit.until > now ? hit : undefined;
  };
  const remember = <V>(m: Map<string, V>, key: string, value: V) => {
    if (m.size >= PARTY_CACHE_MAX) m.clear();
    m.set(key, value);
  };

  return {
    async resolve(sends) {
      const now = Date.now();
      const userKey = (s: { msg: MessageRow }) => `${s.msg.app_id}/${s.msg.platform_connection_id}/${s.msg.to_external_id}`;
      const convKey = (s: { msg: MessageRow }) => `${s.msg.platform_connection_id}/${s.msg.to_external_id}`;
      const newUsers = sends.filter((s) => !fresh(recipients, userKey(s), now));
      const newConvs = sends.filter((s) => !fresh(conversations, convKey(s), now));
      const [found, system] = await Promise.all([
        newUsers.length || newConvs.length
          ? upsertParties(
              deps.sql,
              newUsers.map(({ msg, conn }) => ({
                appId: msg.app_id,
                connectionId: conn.id,
                platform: conn.platform,
                externalId: msg.to_external_id,
              })),
              newConvs.map(({ msg, conn }) => ({ appId: msg.app_id, connectionId: conn.id, externalId: msg.to_external_id })),
            )
          : undefined,
        Promise.all(
          sends.map(({ msg, conn }) =>
            // The name is part of the key: a renamed connection renames its account once.
            systems.get(`${msg.app_id}/${conn.id}/${conn.name}`, () =>
              upsertPlatformUser(deps.sql, {
                appId: msg.app_id,
                connectionId: conn.id,
                platform: conn.platform,
                externalId: getAdapter(conn.platform).systemExternalId(conn.config),
                name: conn.name,
                isSystem: true,
              }),
            ),
          ),
        ),
      ]);
      const users = found?.users;
      const convs = found?.conversations;
      const until = now + PARTY_CACHE_MS;
      for (const [key, ref] of users ?? []) remember(recipients, key, { ref, until });
      for (const [key, id] of convs ?? []) remember(conversations, key, { id, until });
      return sends.map((s, i) => {
        const recipient = users?.get(userKey(s)) ?? fresh(recipients, userKey(s), now)?.ref;
        const conversationId = convs?.get(convKey(s)) ?? fresh(conversations, convKey(s), now)?.id;
        if (!recipient || !conversationId) throw new Error(`send ${s.msg.id}: its recipient or conversation could not be resolved`);
        return { recipient, system: system[i], conversationId };
      });
    },
  };
}

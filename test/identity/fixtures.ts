import { randomUUID } from 'node:crypto';
import { derivedId } from '../../src/ids.js';
import { activateFromInbound, type InboundActivation } from '../../src/identity/link-codes.js';
import { createGuessThrottle } from '../../src/identity/link-code-throttle.js';
import { upsertConversation, upsertPlatformUser } from '../../src/identity/platform-users.js';
import { systemEvent } from '../../src/ledger/event-types.js';
import { enqueue } from '../../src/queues.js';
import type { TestStack } from '../helpers/stack.js';

/**
 * A platform connection row, written directly: the identity tests need connections to hang
 * platform users and conversations on, not the platform adapters (tested on their own).
 */
export async function seedConnection(
  s: TestStack,
  appId: string,
  platform: string,
  configPublic: Record<string, unknown> = {},
): Promise<string> {
  const [row] = await s.deps.sql<{ id: string }[]>`
    INSERT INTO platform_connections (app_id, platform, name, config_sealed, config_public, webhook_secret_sealed)
    VALUES (${appId}, ${platform}, ${`${platform.toLowerCase()} test`}, ${s.deps.secrets.seal('{}')}, ${s.deps.sql.json(configPublic as never)}, ${s.deps.secrets.seal(randomUUID())})
    RETURNING id`;
  return row.id;
}

export interface Conn {
  appId: string;
  id: string;
  platform: string;
}

/**
 * What the inbound worker does with one text message (workers/inbound.ts onMessage), step for
 * step through the same domain functions: upsert the sender, offer the text to link-code
 * activation, upsert the bot and the conversation, and record `message.inbound` through the
 * ledger queue with sent_by/sent_to edges.
 */
export async function receive(
  s: TestStack,
  conn: Conn,
  m: { from: string; name?: string; text: string; chat?: string; at?: Date },
): Promise<{ platformUserId: string; userId: string; conversationId: string; eventId: string; activation: InboundActivation }> {
  const sender = await upsertPlatformUser(s.deps.sql, {
    appId: conn.appId,
    connectionId: conn.id,
    platform: conn.platform,
    externalId: m.from,
    name: m.name ?? null,
  });
  const activation = await activateFromInbound(s.deps, createGuessThrottle(s.deps), {
    appId: conn.appId,
    platformUserId: sender.id,
    text: m.text,
    platform: conn.platform,
  });
  const bot = await upsertPlatformUser(s.deps.sql, {
    appId: conn.appId,
    connectionId: conn.id,
    platform: conn.platform,
    externalId: 'bot',
    name: 'Bot',
    isSystem: true,
  });
  const conversationId = await upsertConversation(s.deps.sql, {
    appId: conn.appId,
    connectionId: conn.id,
    externalId: m.chat ?? m.from,
    inboundAt: m.at ?? new Date(),
  });
  const externalMessageId = randomUUID();
  const eventId = derivedId(conn.id, 'message', externalMessageId);
  await enqueue(s.deps.queues, 'ledger', {
    event: {
      id: eventId,
      app_id: conn.appId,
      ...systemEvent('message.inbound', {
        message: { text: m.text, role: 'user', type: 'text' },
        platform: conn.platform.toLowerCase(),
        external_message_id: externalMessageId,
        conversation_id: conversationId,
        timestamp: (m.at ?? new Date()).toISOString(),
      }),
      edges: [
        { edge_type: 'sent_by', target_node_type: 'platform_user', target_node_id: sender.id },
        { edge_type: 'sent_to', target_node_type: 'platform_user', target_node_id: bot.id },
      ],
      attachments: [],
      conversation_id: conversationId,
      platform_connection_id: conn.id,
    },
  });
  await eventually(async () => (await s.deps.sql`SELECT 1 FROM events WHERE id = ${eventId}`).length === 1);
  return { platformUserId: sender.id, userId: sender.user_id, conversationId, eventId, activation };
}

/** Polls `check` until it holds or the deadline passes (then throws with `what`). */
export async function eventually(check: () => Promise<boolean>, what = 'condition', timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Events of a type in one application's ledger, oldest first. */
export async function eventsOfType(s: TestStack, appId: string, type: string) {
  return s.deps.sql<{ id: string; payload: Record<string, unknown> }[]>`
    SELECT id, payload FROM events WHERE app_id = ${appId} AND event_type = ${type} ORDER BY seq`;
}

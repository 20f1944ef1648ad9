import type { Connection } from '../connections/connections.js';
import type { Deps } from '../deps.js';
import { storeFile } from '../files/files.js';
import type { BlobStore } from '../files/storage.js';
import { derivedId } from '../ids.js';
import { upsertConversation, upsertPlatformUser, type PlatformUserRef } from '../identity/platform-users.js';
import { activateFromInbound } from '../identity/link-codes.js';
import type { GuessThrottle } from '../identity/link-code-throttle.js';
import { downloadMedia } from '../platforms/media.js';
import { getAdapter } from '../platforms/registry.js';
import type { NormalisedRecord } from '../platforms/types.js';
import { systemEvent, type InboundMessage } from '../ledger/event-types.js';
import { enqueue, type LedgerEvent } from '../queues.js';
import type { LookupCache } from '../lookup-cache.js';

type Rec<K extends NormalisedRecord['kind']> = Extract<NormalisedRecord, { kind: K }>;

/** Where a record is being processed: the inbound job's attempt, so last-attempt fallbacks can kick in. */
export interface RecordContext {
  deps: Deps;
  conn: Connection;
  /** 0 on the first attempt. */
  attempt: number;
  finalAttempt: boolean;
  /** Where media bytes go (undefined: PostgreSQL). */
  files: BlobStore | undefined;
  /** The guessing budget of link codes sent as messages. */
  linkCodes: GuessThrottle;
  /** The worker's short-lived memo of system users (one per connection, looked up by every message). */
  systemUsers?: LookupCache<PlatformUserRef>;
}

/** A status for a message we have not stored yet may be racing our own send: retry this many attempts first. */
const UNKNOWN_MESSAGE_RETRIES = 2;

/** Delivery statuses only move forward: a late "delivered" never undoes "read". */
const STATUS_RANK = { sent: 1, failed: 2, delivered: 3, read: 4 } as const;
const RANK_SQL = `COALESCE(CASE delivery_status WHEN 'sent' THEN 1 WHEN 'failed' THEN 2 WHEN 'delivered' THEN 3 WHEN 'read' THEN 4 END, 0)`;

const platformOf = (conn: Connection) => conn.platform.toLowerCase();

/** The event id of an inbound message: the same platform message always maps to the same id. */
export const inboundEventId = (connectionId: string, externalMessageId: string) => derivedId(connectionId, 'message', externalMessageId);

/** The event id of a reaction: one per reacting person, emoji, action and moment. */
export const reactionEventId = (
  connectionId: string,
  r: Pick<Rec<'reaction'>, 'targetExternalMessageId' | 'sender' | 'emoji' | 'action' | 'occurredAt'>,
) => derivedId(connectionId, 'reaction', r.targetExternalMessageId, r.sender.externalId, r.emoji, r.action, r.occurredAt);

async function eventExists(deps: Deps, appId: string, id: string): Promise<boolean> {
  const [row] = await deps.sql`SELECT 1 FROM events WHERE app_id = ${appId} AND id = ${id}`;
  return !!row;
}

function upsertParty(
  deps: Deps,
  conn: Connection,
  party: { externalId: string; name?: string; username?: string },
): Promise<PlatformUserRef> {
  return upsertPlatformUser(deps.sql, {
    appId: conn.appId,
    connectionId: conn.id,
    platform: conn.platform,
    externalId: party.externalId,
    name: party.name ?? party.username ?? null,
  });
}

/** The connected account itself (bot, page, number): `sent_to` of every inbound message. */
function systemUser(ctx: RecordContext): Promise<PlatformUserRef> {
  const { deps, conn } = ctx;
  const externalId = getAdapter(conn.platform).systemExternalId(conn.config);
  const load = () =>
    upsertPlatformUser(deps.sql, {
      appId: conn.appId,
      connectionId: conn.id,
      platform: conn.platform,
      externalId,
      name: conn.name,
      isSystem: true,
    });
  return ctx.systemUsers ? ctx.systemUsers.get(`${conn.id}\u0000${externalId}\u0000${conn.name}`, load) : load();
}

/**
 * A message from a user: the people and the conversation upserted, media stored as files,
 * then `message.inbound` recorded — after transcription for voice and audio (docs/guide.md, streams).
 */
export async function recordMessage(ctx: RecordContext, r: Rec<'message'>): Promise<void> {
  const { deps, conn } = ctx;
  const eventId = r.edited
    ? derivedId(conn.id, 'edit', r.externalMessageId, r.occurredAt, r.message.text)
    : inboundEventId(conn.id, r.externalMessageId);
  // A redelivery after the first one was recorded: nothing to download or transcribe again.
  if (await eventExists(deps, conn.appId, eventId)) return;

  const sender = await upsertParty(deps, conn, r.sender);
  await activateFromInbound(deps, ctx.linkCodes, {
    appId: conn.appId,
    platformUserId: sender.id,
    text: r.message.text,
    platform: conn.platform,
  });
  const system = await systemUser(ctx);
  const conversationId = await upsertConversation(deps.sql, {
    appId: conn.appId,
    connectionId: conn.id,
    externalId: r.conversation.externalId,
    threadId: r.conversation.threadId,
    name: r.conversation.name,
    // Also the reply-window bookkeeping: WhatsApp/Messenger sends check it (REPLY_WINDOW_CLOSED).
    inboundAt: new Date(r.occurredAt),
  });

  const message: InboundMessage = { text: r.message.text, role: 'user', type: r.message.type };
  if (r.message.caption !== undefined) message.caption = r.message.caption;
  if (r.message.location) message.location = r.message.location;
  if (r.message.contact) message.contact = r.message.contact;
  if (r.message.extra) Object.assign(message, r.message.extra);
  // A reply follows from the message it answers, when we recorded that one.
  const repliedTo = r.replyTo ? await eventOfMessage(ctx, r.replyTo, r.conversation.externalId) : null;
  if (r.replyTo) message.reply_to = { external_message_id: r.replyTo, event_id: repliedTo };
  const edges: LedgerEvent['edges'] = [
    { edge_type: 'sent_by', target_node_type: 'platform_user', target_node_id: sender.id },
    { edge_type: 'sent_to', target_node_type: 'platform_user', target_node_id: system.id },
  ];
  const attachments: Record<string, unknown>[] = [];
  const media = r.message.media;
  const isAudio = !!media && (media.isAudio || r.message.type === 'voice' || r.message.type === 'audio');
  let audioFileId: string | undefined;
  if (media) {
    try {
      const got = await downloadMedia(conn.platform, conn.config, media, deps.config.OUTBOUND_ADDRESS_POLICY);
      const file = await storeFile(
        deps.sql,
        conn.appId,
        {
          filename: got.filename ?? media.filename,
          // "audio/ogg; codecs=opus" (WhatsApp) is stored as its media type alone.
          declaredMime: got.mimeType?.split(';')[0].trim(),
          data: got.data,
          source: { platform: platformOf(conn), platform_file_id: media.platformFileId ?? null },
        },
        ctx.files,
      );
      message.media = { id: file.id, mime_type: file.mime_type, url: `/v1/files/${file.id}/content` };
      attachments.push({
        file_id: file.id,
        mime_type: file.mime_type,
        size_bytes: Number(file.size_bytes),
        kind: r.message.type,
        ...(media.filename ? { filename: media.filename } : {}),
      });
      edges.push({ edge_type: 'attachment', target_node_type: 'file', target_node_id: file.id });
      if (isAudio) audioFileId = file.id;
    } catch (err) {
      // A transient download failure retries the job; on the last attempt, or when the outbound
      // address policy refused the URL (it would again), the message is kept without its file.
      if (!ctx.finalAttempt && (err as { code?: string }).code !== 'ETARGETREFUSED') throw err;
      message.media = { id: null, mime_type: media.mimeType ?? null, url: null, error: (err as Error).message };
    }
  }

  // Notifications for audio wait for the transcript: the transcription job records the event.
  const transcribedFileId = isAudio && deps.config.TRANSCRIPTION_API_BASE ? audioFileId : undefined;
  if (isAudio && !transcribedFileId)
    message.transcription = audioFileId ? { status: 'skipped' } : { status: 'failed', error: 'the audio could not be downloaded' };
  const event: LedgerEvent = {
    id: eventId,
    app_id: conn.appId,
    ...systemEvent('message.inbound', {
      message,
      platform: platformOf(conn),
      external_message_id: r.externalMessageId,
      conversation_id: conversationId,
      timestamp: r.occurredAt,
      edited: r.edited,
    }),
    edges,
    attachments,
    // An edit follows from the original message when we recorded it; a reply from the message it answers.
    origin_event_id:
      r.edited && (await eventExists(deps, conn.appId, inboundEventId(conn.id, r.externalMessageId)))
        ? inboundEventId(conn.id, r.externalMessageId)
        : repliedTo,
    conversation_id: conversationId,
    platform_connection_id: conn.id,
  };
  if (transcribedFileId) {
    await enqueue(
      deps.queues,
      'transcription',
      { app_id: conn.appId, event, file_id: transcribedFileId },
      { backoff: { type: 'exponential', delay: deps.config.TRANSCRIPTION_RETRY_BASE_MS } },
    );
    return;
  }
  await enqueue(deps.queues, 'ledger', { event });
}

interface OutboundRow {
  id: string;
  to_external_id: string;
  external_message_id: string;
}

/** Records `message.status` for one of our messages; the caller has already moved its delivery status forward. */
async function enqueueStatus(
  ctx: RecordContext,
  p: {
    externalMessageId: string;
    status: Rec<'status'>['status'];
    outbound?: OutboundRow;
    recipient?: string;
    error?: Rec<'status'>['error'];
    occurredAt: string;
  },
) {
  const { deps, conn } = ctx;
  const edges: LedgerEvent['edges'] = [];
  const recipientId = p.recipient ?? p.outbound?.to_external_id;
  if (recipientId) {
    const recipient = await upsertParty(deps, conn, { externalId: recipientId });
    edges.push({ edge_type: 'sent_to', target_node_type: 'platform_user', target_node_id: recipient.id });
  }
  // The message.outbound event of a sent message has the message's own id (workers/send.ts).
  const origin = p.outbound?.id ?? null;
  await enqueue(deps.queues, 'ledger', {
    event: {
      id: derivedId(conn.id, 'status', p.externalMessageId, p.status),
      app_id: conn.appId,
      ...systemEvent('message.status', {
        kind: 'platform',
        status: p.status,
        external_message_id: p.externalMessageId,
        origin_event_id: origin,
        platform: platformOf(conn),
        timestamp: p.occurredAt,
        error: p.error,
      }),
      edges,
      attachments: [],
      origin_event_id: origin,
      platform_connection_id: conn.id,
    },
  });
}

/**
 * A delivery status of one of our messages (WhatsApp statuses, Twilio callbacks, Messenger
 * delivery mids). Statuses arrive out of order; one that would move a message backwards
 * (delivered after read) records nothing.
 */
export async function recordStatus(ctx: RecordContext, r: Rec<'status'>): Promise<void> {
  const { deps, conn } = ctx;
  const [outbound] = await deps.sql<OutboundRow[]>`
    SELECT id, to_external_id, external_message_id FROM outbound_messages
     WHERE app_id = ${conn.appId} AND platform_connection_id = ${conn.id} AND external_message_id = ${r.externalMessageId}`;
  if (!outbound) {
    // The platform can report "sent" before our send worker has stored the message's id.
    if (ctx.attempt < UNKNOWN_MESSAGE_RETRIES) throw new Error(`status for message ${r.externalMessageId} not known yet`);
  } else {
    // `<=`: the same status again (a retried job, a redelivery) re-enqueues the same event id,
    // which the ledger writes once, so a crash between this update and the enqueue loses nothing.
    const moved = await deps.sql`
      UPDATE outbound_messages SET delivery_status = ${r.status}
       WHERE app_id = ${conn.appId} AND id = ${outbound.id} AND ${deps.sql.unsafe(RANK_SQL)} <= ${STATUS_RANK[r.status]}
       RETURNING id`;
    if (moved.length === 0) return;
  }
  await enqueueStatus(ctx, {
    externalMessageId: r.externalMessageId,
    status: r.status,
    outbound,
    recipient: r.recipient?.externalId,
    error: r.error,
    occurredAt: r.occurredAt,
  });
}

/**
 * Messenger/Instagram watermarks: every message we sent the user up to `upTo` reached the
 * status. Compared with when we queued each message, which precedes the platform's own
 * timestamp for it, so a message is never claimed read before it was sent.
 */
export async function recordWatermark(ctx: RecordContext, r: Rec<'watermark'>): Promise<void> {
  const { deps, conn } = ctx;
  const moved = await deps.sql<OutboundRow[]>`
    UPDATE outbound_messages SET delivery_status = ${r.status}
     WHERE app_id = ${conn.appId} AND platform_connection_id = ${conn.id} AND to_external_id = ${r.recipient.externalId}
       AND status = 'sent' AND external_message_id IS NOT NULL AND created_at <= ${new Date(r.upTo)}
       AND ${deps.sql.unsafe(RANK_SQL)} < ${STATUS_RANK[r.status]}
     RETURNING id, to_external_id, external_message_id`;
  for (const outbound of moved) {
    await enqueueStatus(ctx, {
      externalMessageId: outbound.external_message_id,
      status: r.status,
      outbound,
      recipient: r.recipient.externalId,
      occurredAt: r.occurredAt,
    });
  }
}

/**
 * The event of a message named by its platform id — a person's `message.inbound`, or our
 * `message.outbound` — or null when we recorded no such message. Ours are stored under the
 * platform's id, which for per-chat ids (Telegram, Slack) may be the bare `localId`.
 */
async function eventOfMessage(ctx: RecordContext, externalMessageId: string, chatId: string, localId?: string): Promise<string | null> {
  const { deps, conn } = ctx;
  const inboundId = inboundEventId(conn.id, externalMessageId);
  if (await eventExists(deps, conn.appId, inboundId)) return inboundId;
  const [outbound] = await deps.sql<{ id: string }[]>`
    SELECT id FROM outbound_messages
     WHERE app_id = ${conn.appId} AND platform_connection_id = ${conn.id} AND status = 'sent'
       AND (external_message_id = ${externalMessageId}
            OR (external_message_id = ${localId ?? null} AND to_external_id = ${chatId}))
     LIMIT 1`;
  return outbound?.id ?? null;
}

/** A reaction added or removed; its origin is the reacted message's event when we know it. */
export async function recordReaction(ctx: RecordContext, r: Rec<'reaction'>): Promise<void> {
  const { deps, conn } = ctx;
  const sender = await upsertParty(deps, conn, r.sender);
  const conversationId = await upsertConversation(deps.sql, {
    appId: conn.appId,
    connectionId: conn.id,
    externalId: r.conversation.externalId,
  });
  const origin = await eventOfMessage(ctx, r.targetExternalMessageId, r.conversation.externalId, r.targetLocalId);
  await enqueue(deps.queues, 'ledger', {
    event: {
      id: reactionEventId(conn.id, r),
      app_id: conn.appId,
      ...systemEvent('message.reaction', {
        reaction: { emoji: r.emoji, message_id: r.targetExternalMessageId },
        action: r.action,
        platform: platformOf(conn),
        conversation_id: conversationId,
        origin_event_id: origin,
        timestamp: r.occurredAt,
      }),
      edges: [{ edge_type: 'sent_by', target_node_type: 'platform_user', target_node_id: sender.id }],
      attachments: [],
      origin_event_id: origin,
      conversation_id: conversationId,
      platform_connection_id: conn.id,
    },
  });
}

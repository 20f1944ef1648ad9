import { UnrecoverableError, type Job } from 'bullmq';
import { loadConnectionById, type Connection } from '../src/connections/connections.js';
import type { Deps } from '../src/deps.js';
import { storeFile } from '../src/files/files.js';
import { derivedId } from '../src/ids.js';
import { upsertConversation, upsertPlatformUser } from '../src/identity/platform-users.js';
import { activateFromInbound } from '../src/identity/link-codes.js';
import { downloadMedia } from '../src/platforms/media.js';
import { getInbound, systemExternalId } from '../src/platforms/registry.js';
import type { NormalisedRecord } from '../src/platforms/types.js';
import { enqueue, type JobData, type LedgerEvent } from '../src/queues.js';
import type { ProcessorDef } from './host.js';

type Rec<K extends NormalisedRecord['kind']> = Extract<NormalisedRecord, { kind: K }>;

/** Delivery statuses only move forward: a late "delivered" never undoes "read". */
const STATUS_RANK: Record<string, number> = { sent: 1, failed: 2, delivered: 3, read: 4 };

/**
 * The inbound queue: normalise a verified platform delivery into records, upsert the people
 * and conversation involved, and record events under ids derived from the platform's own ids,
 * so a redelivered payload or a retried job records nothing twice.
 */
export const inboundProcessor: ProcessorDef<'inbound'> = {
  queue: 'inbound',
  create(deps) {
    return async (job: Job) => {
      const d = job.data as JobData<'inbound'>;
      const conn = await loadConnectionById(deps, d.connection_id);
      if (!conn) return { skipped: 'connection deleted' };
      let records: NormalisedRecord[];
      try {
        records = getInbound(conn.platform).normalise({ rawBody: Buffer.from(d.body, 'base64'), headers: d.headers });
      } catch (err) {
        throw new UnrecoverableError(`malformed ${conn.platform} payload: ${(err as Error).message}`);
      }
      const finalAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      for (const r of records) {
        if (r.kind === 'message') await onMessage(deps, conn, r, finalAttempt);
        else if (r.kind === 'status') await onStatus(deps, conn, r);
        else await onReaction(deps, conn, r);
      }
      return { records: records.length };
    };
  },
};

const platformOf = (conn: Connection) => conn.platform.toLowerCase();

async function systemUser(deps: Deps, conn: Connection) {
  return upsertPlatformUser(deps.sql, {
    appId: conn.appId,
    connectionId: conn.id,
    platform: conn.platform,
    externalId: systemExternalId(conn.platform, conn.config),
    name: conn.name,
    isSystem: true,
  });
}

/** The event id of an inbound message: the same platform message always maps to the same id. */
export const inboundEventId = (connectionId: string, externalMessageId: string) => derivedId(connectionId, 'message', externalMessageId);

async function onMessage(deps: Deps, conn: Connection, r: Rec<'message'>, finalAttempt: boolean) {
  const sender = await upsertPlatformUser(deps.sql, {
    appId: conn.appId,
    connectionId: conn.id,
    platform: conn.platform,
    externalId: r.sender.externalId,
    name: r.sender.name ?? r.sender.username ?? null,
  });
  await activateFromInbound(deps, { appId: conn.appId, platformUserId: sender.id, text: r.message.text, platform: conn.platform });
  const system = await systemUser(deps, conn);
  const conversationId = await upsertConversation(deps.sql, {
    appId: conn.appId,
    connectionId: conn.id,
    externalId: r.conversation.externalId,
    threadId: r.conversation.threadId,
    name: r.conversation.name,
    inboundAt: new Date(r.occurredAt),
  });

  const message: Record<string, unknown> = { text: r.message.text, role: 'user', type: r.message.type };
  if (r.message.caption !== undefined) message.caption = r.message.caption;
  if (r.message.location) message.location = r.message.location;
  if (r.message.contact) message.contact = r.message.contact;
  const attachments: Record<string, unknown>[] = [];
  const edges: LedgerEvent['edges'] = [
    { edge_type: 'sent_by', target_node_type: 'platform_user', target_node_id: sender.id },
    { edge_type: 'sent_to', target_node_type: 'platform_user', target_node_id: system.id },
  ];
  let audioFileId: string | undefined;
  if (r.message.media) {
    try {
      const got = await downloadMedia(conn.platform, conn.config, r.message.media);
      const file = await storeFile(deps.sql, conn.appId, {
        filename: got.filename,
        declaredMime: got.mimeType,
        data: got.data,
        source: { platform: platformOf(conn), platform_file_id: r.message.media.platformFileId ?? null },
      });
      message.media = { id: file.id, mime_type: file.mime_type, url: `/v1/files/${file.id}/content` };
      attachments.push({ file_id: file.id, mime_type: file.mime_type, size_bytes: Number(file.size_bytes), kind: r.message.type });
      edges.push({ edge_type: 'attachment', target_node_type: 'file', target_node_id: file.id });
      if (r.message.media.isAudio || r.message.type === 'voice' || r.message.type === 'audio') audioFileId = file.id;
    } catch (err) {
      // Transient download failures retry the job; on the last attempt the message is kept without its file.
      if (!finalAttempt) throw err;
      message.media = { id: null, mime_type: r.message.media.mimeType ?? null, url: null, error: (err as Error).message };
    }
  }

  const event: LedgerEvent = {
    id: r.edited ? derivedId(conn.id, 'edit', r.externalMessageId, r.occurredAt, r.message.text) : inboundEventId(conn.id, r.externalMessageId),
    app_id: conn.appId,
    event_type: 'message.inbound',
    payload: {
      message,
      platform: platformOf(conn),
      external_message_id: r.externalMessageId,
      conversation_id: conversationId,
      ...(r.edited ? { edited: true } : {}),
    },
    edges,
    attachments,
    conversation_id: conversationId,
    platform_connection_id: conn.id,
  };
  if (audioFileId) {
    if (deps.config.TRANSCRIPTION_API_BASE) {
      // Notifications for audio wait for the transcript (SPEC 6.6 rule 4).
      await enqueue(deps.queues, 'transcription', { app_id: conn.appId, event, file_id: audioFileId });
      return;
    }
    message.transcription = { status: 'skipped' };
  }
  await enqueue(deps.queues, 'ledger', { event });
}

async function onStatus(deps: Deps, conn: Connection, r: Rec<'status'>) {
  const [sent] = await deps.sql<{ id: string; delivery_status: string | null; to_external_id: string }[]>`
    SELECT id, delivery_status, to_external_id FROM outbound_messages
     WHERE platform_connection_id = ${conn.id} AND external_message_id = ${r.externalMessageId}`;
  if (sent) {
    const moved = await deps.sql`
      UPDATE outbound_messages SET delivery_status = ${r.status}
       WHERE id = ${sent.id}
         AND COALESCE(CASE delivery_status WHEN 'sent' THEN 1 WHEN 'failed' THEN 2 WHEN 'delivered' THEN 3 WHEN 'read' THEN 4 END, 0) < ${STATUS_RANK[r.status]}
       RETURNING id`;
    if (moved.length === 0) return;
  }
  const edges: LedgerEvent['edges'] = [];
  const recipientId = r.recipient?.externalId ?? sent?.to_external_id;
  if (recipientId) {
    const recipient = await upsertPlatformUser(deps.sql, { appId: conn.appId, connectionId: conn.id, platform: conn.platform, externalId: recipientId });
    edges.push({ edge_type: 'sent_to', target_node_type: 'platform_user', target_node_id: recipient.id });
  }
  await enqueue(deps.queues, 'ledger', {
    event: {
      id: derivedId(conn.id, 'status', r.externalMessageId, r.status),
      app_id: conn.appId,
      event_type: 'message.status',
      payload: {
        status: r.status,
        external_message_id: r.externalMessageId,
        origin_event_id: sent?.id ?? null,
        platform: platformOf(conn),
        timestamp: r.occurredAt,
        ...(r.error ? { error: r.error } : {}),
      },
      edges,
      attachments: [],
      origin_event_id: sent ? await existingEventId(deps, conn.appId, sent.id) : null,
      platform_connection_id: conn.id,
    },
  });
}

async function existingEventId(deps: Deps, appId: string, id: string): Promise<string | null> {
  const [row] = await deps.sql`SELECT 1 FROM events WHERE app_id = ${appId} AND id = ${id}`;
  return row ? id : null;
}

async function onReaction(deps: Deps, conn: Connection, r: Rec<'reaction'>) {
  const sender = await upsertPlatformUser(deps.sql, { appId: conn.appId, connectionId: conn.id, platform: conn.platform, externalId: r.sender.externalId, name: r.sender.name ?? null });
  const conversationId = await upsertConversation(deps.sql, { appId: conn.appId, connectionId: conn.id, externalId: r.conversation.externalId });
  const [outbound] = await deps.sql<{ id: string }[]>`
    SELECT id FROM outbound_messages WHERE platform_connection_id = ${conn.id} AND external_message_id = ${r.targetExternalMessageId}`;
  const origin = (await existingEventId(deps, conn.appId, inboundEventId(conn.id, r.targetExternalMessageId))) ?? (outbound ? await existingEventId(deps, conn.appId, outbound.id) : null);
  await enqueue(deps.queues, 'ledger', {
    event: {
      id: derivedId(conn.id, 'reaction', r.targetExternalMessageId, r.sender.externalId, r.emoji, r.action, r.occurredAt),
      app_id: conn.appId,
      event_type: 'message.reaction',
      payload: {
        reaction: { emoji: r.emoji, message_id: r.targetExternalMessageId },
        action: r.action,
        platform: platformOf(conn),
        conversation_id: conversationId,
        origin_event_id: origin,
      },
      edges: [{ edge_type: 'sent_by', target_node_type: 'platform_user', target_node_id: sender.id }],
      attachments: [],
      origin_event_id: origin,
      conversation_id: conversationId,
      platform_connection_id: conn.id,
    },
  });
}

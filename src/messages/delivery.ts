import { Job } from 'bullmq';
import type { Connection } from '../connections/connections.js';
import type { Deps } from '../deps.js';
import type { ErrorCode } from '../errors.js';
import { readFiles } from '../files/files.js';
import type { BlobStore } from '../files/storage.js';
import { derivedId } from '../ids.js';
import { upsertConversation, upsertPlatformUser } from '../identity/platform-users.js';
import { getAdapter } from '../platforms/registry.js';
import type { OutboundFile, PlatformError } from '../platforms/types.js';
import { systemEvent, systemEventType } from '../ledger/event-types.js';
import { JOBS, enqueue, type LedgerEvent } from '../queues.js';
import type { MessageRow } from './messages.js';

/** A send's final error as stored on the message and shown in `details` of a 422. */
export interface StoredError {
  code: ErrorCode;
  message: string;
  platform_code?: string | number;
  platform_message?: string;
}

export function storedError(e: Pick<PlatformError, 'message' | 'platformCode' | 'platformMessage'> & { code: ErrorCode }): StoredError {
  return {
    code: e.code,
    message: e.message,
    ...(e.platformCode !== undefined ? { platform_code: e.platformCode } : {}),
    ...(e.platformMessage ? { platform_message: e.platformMessage } : {}),
  };
}

export async function loadMessage(deps: Deps, appId: string, id: string): Promise<MessageRow | undefined> {
  const [msg] = await deps.sql<MessageRow[]>`SELECT * FROM outbound_messages WHERE app_id = ${appId} AND id = ${id}`;
  return msg;
}

/** Whether an earlier message to the same recipient of the same connection is still unsettled. */
export async function hasEarlierPending(deps: Deps, msg: MessageRow): Promise<boolean> {
  const rows = await deps.sql`
    SELECT 1 FROM outbound_messages
     WHERE platform_connection_id = ${msg.platform_connection_id} AND to_external_id = ${msg.to_external_id}
       AND recipient_seq < ${msg.recipient_seq} AND status IN ('queued', 'sending')
     LIMIT 1`;
  return rows.length > 0;
}

/**
 * Wakes the next message to the same recipient once this one is settled: it waits in
 * `delayed` for its predecessor, so ordering costs no polling. A promotion that misses (the
 * successor is not delayed yet) is covered by the successor re-checking after it delays itself.
 */
export async function promoteSuccessor(deps: Deps, msg: MessageRow): Promise<void> {
  const [next] = await deps.sql<{ id: string }[]>`
    SELECT id FROM outbound_messages
     WHERE platform_connection_id = ${msg.platform_connection_id} AND to_external_id = ${msg.to_external_id}
       AND recipient_seq > ${msg.recipient_seq} AND status IN ('queued', 'sending')
     ORDER BY recipient_seq LIMIT 1`;
  if (next) await promoteSendJob(deps, next.id);
}

async function promoteSendJob(deps: Deps, messageId: string): Promise<void> {
  const job = await Job.fromId(deps.queues.send, JOBS.send.jobId({ message_id: messageId }));
  if (job && (await job.isDelayed())) await job.promote().catch(() => undefined);
}

/** Claims the message for one platform call; false when another worker settled it meanwhile. */
export async function markSending(deps: Deps, msg: MessageRow): Promise<boolean> {
  const rows = await deps.sql`
    UPDATE outbound_messages SET status = 'sending', attempts = attempts + 1
     WHERE id = ${msg.id} AND status IN ('queued', 'sending') RETURNING 1`;
  return rows.length > 0;
}

export async function markSent(deps: Deps, msg: MessageRow, externalMessageId: string): Promise<void> {
  await deps.sql`UPDATE outbound_messages SET status = 'sent', external_message_id = ${externalMessageId}, error = NULL, finished_at = now() WHERE id = ${msg.id}`;
}

/** A transient failure: back to queued (successors keep waiting), the error kept for GET /v1/messages/:id. */
export async function markRetrying(deps: Deps, msg: MessageRow, error: StoredError): Promise<void> {
  await deps.sql`UPDATE outbound_messages SET status = 'queued', error = ${deps.sql.json(error as never)} WHERE id = ${msg.id}`;
}

export async function markFailed(deps: Deps, msg: MessageRow, error: StoredError): Promise<void> {
  await deps.sql`UPDATE outbound_messages SET status = 'failed', error = ${deps.sql.json(error as never)}, finished_at = now() WHERE id = ${msg.id}`;
}

/** The stored files of a message, in the order given, from Postgres or the configured store. */
export async function loadFiles(deps: Deps, store: BlobStore | undefined, msg: MessageRow): Promise<OutboundFile[] | undefined> {
  if (msg.file_ids.length === 0) return undefined;
  const files = await readFiles(deps.sql, msg.app_id, msg.file_ids, store);
  return files.map((f) => ({ filename: f.filename ?? f.id, mimeType: f.mime_type ?? 'application/octet-stream', data: f.data }));
}

/**
 * E-mail threading: the Message-ID of the latest inbound e-mail from this address on this
 * connection, so the reply carries In-Reply-To/References and lands in the same thread.
 */
export async function inboundToReplyTo(deps: Deps, msg: MessageRow): Promise<string | undefined> {
  const [row] = await deps.sql<{ external_message_id: string | null }[]>`
    SELECT e.payload->>'external_message_id' AS external_message_id
      FROM conversations c
      JOIN events e ON e.app_id = c.app_id AND e.conversation_id = c.id
     WHERE c.app_id = ${msg.app_id} AND c.platform_connection_id = ${msg.platform_connection_id}
       AND lower(c.external_id) = lower(${msg.to_external_id}) AND e.event_type = ${systemEventType('message.inbound')}
     ORDER BY e.seq DESC LIMIT 1`;
  return row?.external_message_id ?? undefined;
}

/** The recipient, the connection's own system user and the conversation: independent lookups, made together. */
async function parties(deps: Deps, msg: MessageRow, conn: Connection) {
  const [recipient, system, conversationId] = await Promise.all([
    upsertPlatformUser(deps.sql, { appId: msg.app_id, connectionId: conn.id, platform: conn.platform, externalId: msg.to_external_id }),
    upsertPlatformUser(deps.sql, {
      appId: msg.app_id,
      connectionId: conn.id,
      platform: conn.platform,
      externalId: getAdapter(conn.platform).systemExternalId(conn.config),
      name: conn.name,
      isSystem: true,
    }),
    conversationOf(deps, msg, conn),
  ]);
  return { recipient, system, conversationId };
}

/** The recipient's conversation: found by one index probe on every send but the first (no row lock, no write). */
async function conversationOf(deps: Deps, msg: MessageRow, conn: Connection): Promise<string> {
  const [found] = await deps.sql<{ id: string }[]>`
    SELECT id FROM conversations WHERE platform_connection_id = ${conn.id} AND external_id = ${msg.to_external_id} AND thread_id = ''`;
  return found?.id ?? upsertConversation(deps.sql, { appId: msg.app_id, connectionId: conn.id, externalId: msg.to_external_id });
}

/**
 * Records `message.outbound` under the message's own id (the id POST /v1/messages answered),
 * so a repeat writes nothing twice: `sent_to` the recipient's platform user (created on first
 * sight), `sent_by` the connection's system user.
 */
export async function recordSent(deps: Deps, msg: MessageRow, conn: Connection, externalMessageId: string): Promise<void> {
  const { recipient, system, conversationId } = await parties(deps, msg, conn);
  const event: LedgerEvent = {
    id: msg.id,
    app_id: msg.app_id,
    ...systemEvent('message.outbound', {
      text: msg.text,
      platform: conn.platform.toLowerCase(),
      external_message_id: externalMessageId,
      conversation_id: conversationId,
    }),
    edges: [
      { edge_type: 'sent_to', target_node_type: 'platform_user', target_node_id: recipient.id },
      { edge_type: 'sent_by', target_node_type: 'platform_user', target_node_id: system.id },
      ...msg.file_ids.map((id) => ({ edge_type: 'attachment', target_node_type: 'file' as const, target_node_id: id })),
    ],
    attachments: msg.file_ids.map((id) => ({ file_id: id })),
    conversation_id: conversationId,
    platform_connection_id: conn.id,
  };
  await enqueue(deps.queues, 'ledger', { event });
}

/** A final failure: `message.status` with status failed, the error and the message id (id derived, so a repeat is one event). */
export async function recordFailed(deps: Deps, msg: MessageRow, conn: Connection, error: StoredError): Promise<void> {
  const { recipient, conversationId } = await parties(deps, msg, conn);
  await enqueue(deps.queues, 'ledger', {
    event: {
      id: derivedId(msg.id, 'failed'),
      app_id: msg.app_id,
      ...systemEvent('message.status', {
        kind: 'send_failed',
        message_id: msg.id,
        platform: conn.platform.toLowerCase(),
        error,
        conversation_id: conversationId,
      }),
      edges: [{ edge_type: 'sent_to', target_node_type: 'platform_user', target_node_id: recipient.id }],
      attachments: [],
      conversation_id: conversationId,
      platform_connection_id: conn.id,
    },
  });
}

import { DelayedError, type Job } from 'bullmq';
import { loadConnection, recordHealth, type Connection } from '../src/connections/connections.js';
import type { Deps } from '../src/deps.js';
import { derivedId } from '../src/ids.js';
import { upsertConversation, upsertPlatformUser } from '../src/identity/platform-users.js';
import type { MessageRow } from '../src/messages/messages.js';
import { takeSendBudget } from '../src/platforms/rate-budget.js';
import { getAdapter, systemExternalId } from '../src/platforms/registry.js';
import type { OutboundFile, PlatformError } from '../src/platforms/types.js';
import { enqueue, type JobData, type LedgerEvent } from '../src/queues.js';
import type { ProcessorDef } from './host.js';

const PLATFORM_TIMEOUT_MS = 15_000;
/** How long a send waits before re-checking its predecessor to the same recipient. */
const ORDER_RECHECK_MS = 100;

/**
 * The send queue: one platform call per job, in order per recipient, within the platform's
 * budgets. Waiting (for a predecessor, a budget, a platform's retry-after) moves the job to
 * delayed without using up an attempt or holding a worker slot.
 */
export const sendProcessor: ProcessorDef<'send'> = {
  queue: 'send',
  create(deps) {
    return async (job: Job, token?: string) => {
      const { message_id, app_id } = job.data as JobData<'send'>;
      const [msg] = await deps.sql<MessageRow[]>`SELECT * FROM outbound_messages WHERE app_id = ${app_id} AND id = ${message_id}`;
      if (!msg) return { skipped: 'unknown message' };
      const conn = await loadConnection(deps, app_id, msg.platform_connection_id);
      if (!conn) return fail(deps, msg, undefined, { code: 'PLATFORM_REJECTED', message: 'The platform connection was deleted', retryable: false });
      // Already done: make sure its event is recorded (a crash may have come between the two), and stop.
      if (msg.status === 'sent') return recordSent(deps, msg, conn, msg.external_message_id!);
      if (msg.status === 'failed') return { status: 'failed' };

      const delay = async (ms: number) => {
        await job.moveToDelayed(Date.now() + ms, token);
        throw new DelayedError();
      };
      const [earlier] = await deps.sql`
        SELECT 1 FROM outbound_messages
         WHERE platform_connection_id = ${msg.platform_connection_id} AND to_external_id = ${msg.to_external_id}
           AND recipient_seq < ${msg.recipient_seq} AND status IN ('queued', 'sending')
         LIMIT 1`;
      if (earlier) return delay(ORDER_RECHECK_MS);
      const wait = await takeSendBudget(deps.redis, deps.config.REDIS_PREFIX, conn.platform, conn.id, msg.to_external_id);
      if (wait > 0) return delay(wait);

      await deps.sql`UPDATE outbound_messages SET status = 'sending', attempts = attempts + 1 WHERE id = ${msg.id}`;
      const files = await loadFiles(deps, msg);
      const adapter = getAdapter(conn.platform);
      const outcome = await adapter.send(
        conn.config,
        { to: msg.to_external_id, text: msg.text, parseMode: msg.options.parse_mode, subject: msg.options.subject, files },
        { timeoutMs: PLATFORM_TIMEOUT_MS },
      );
      if (outcome.ok) {
        await deps.sql`UPDATE outbound_messages SET status = 'sent', external_message_id = ${outcome.externalMessageId}, error = NULL, finished_at = now() WHERE id = ${msg.id}`;
        await recordHealth(deps, conn.id, { ok: true });
        return recordSent(deps, msg, conn, outcome.externalMessageId);
      }
      const error = outcome.error;
      if (['PLATFORM_AUTH_FAILED', 'PLATFORM_UNAVAILABLE'].includes(error.code)) await recordHealth(deps, conn.id, { ok: false, error: `${error.code}: ${error.message}` });
      const attempts = msg.attempts + 1;
      const lastAttempt = attempts >= (job.opts.attempts ?? 1);
      if (!error.retryable || lastAttempt) return fail(deps, msg, conn, error);
      await deps.sql`UPDATE outbound_messages SET status = 'queued', error = ${deps.sql.json(errorJson(error))} WHERE id = ${msg.id}`;
      // The platform named its own wait: honour it exactly, without spending a BullMQ attempt.
      if (error.retryAfterMs !== undefined) return delay(error.retryAfterMs);
      throw new Error(`${error.code}: ${error.message}`);
    };
  },
};

function errorJson(e: PlatformError) {
  return { code: e.code, message: e.message, ...(e.platformCode !== undefined ? { platform_code: e.platformCode } : {}), ...(e.platformMessage ? { platform_message: e.platformMessage } : {}) };
}

async function loadFiles(deps: Deps, msg: MessageRow): Promise<OutboundFile[] | undefined> {
  if (msg.file_ids.length === 0) return undefined;
  const rows = await deps.sql<{ id: string; filename: string | null; mime_type: string | null; data: Buffer | null }[]>`
    SELECT id, filename, mime_type, data FROM files WHERE app_id = ${msg.app_id} AND id = ANY(${msg.file_ids}::uuid[])`;
  const byId = new Map(rows.map((r) => [r.id, r]));
  return msg.file_ids.flatMap((id) => {
    const f = byId.get(id);
    return f?.data ? [{ filename: f.filename ?? id, mimeType: f.mime_type ?? 'application/octet-stream', data: f.data }] : [];
  });
}

async function parties(deps: Deps, msg: MessageRow, conn: Connection) {
  const recipient = await upsertPlatformUser(deps.sql, { appId: msg.app_id, connectionId: conn.id, platform: conn.platform, externalId: msg.to_external_id });
  const system = await upsertPlatformUser(deps.sql, {
    appId: msg.app_id,
    connectionId: conn.id,
    platform: conn.platform,
    externalId: systemExternalId(conn.platform, conn.config),
    name: conn.name,
    isSystem: true,
  });
  const conversationId = await upsertConversation(deps.sql, { appId: msg.app_id, connectionId: conn.id, externalId: msg.to_external_id });
  return { recipient, system, conversationId };
}

/** Records `message.outbound` under the message's own id, so a repeat writes nothing twice. */
async function recordSent(deps: Deps, msg: MessageRow, conn: Connection, externalMessageId: string) {
  const { recipient, system, conversationId } = await parties(deps, msg, conn);
  const event: LedgerEvent = {
    id: msg.id,
    app_id: msg.app_id,
    event_type: 'message.outbound',
    payload: {
      message: { text: msg.text, role: 'assistant' },
      platform: conn.platform.toLowerCase(),
      external_message_id: externalMessageId,
      conversation_id: conversationId,
      status: 'sent',
    },
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
  return { status: 'sent', external_message_id: externalMessageId };
}

/** A final failure: the message is marked failed and `message.status` (failed) recorded. */
async function fail(deps: Deps, msg: MessageRow, conn: Connection | undefined, error: PlatformError) {
  await deps.sql`UPDATE outbound_messages SET status = 'failed', error = ${deps.sql.json(errorJson(error))}, finished_at = now() WHERE id = ${msg.id}`;
  if (conn) {
    const { recipient, conversationId } = await parties(deps, msg, conn);
    await enqueue(deps.queues, 'ledger', {
      event: {
        id: derivedId(msg.id, 'failed'),
        app_id: msg.app_id,
        event_type: 'message.status',
        payload: { status: 'failed', message_id: msg.id, origin_event_id: null, external_message_id: null, platform: conn.platform.toLowerCase(), error: errorJson(error), conversation_id: conversationId },
        edges: [{ edge_type: 'sent_to', target_node_type: 'platform_user', target_node_id: recipient.id }],
        attachments: [],
        conversation_id: conversationId,
        platform_connection_id: conn.id,
      },
    });
  }
  return { status: 'failed', error: error.code };
}

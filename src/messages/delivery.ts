import { Job } from 'bullmq';
import type { Connection } from '../connections/connections.js';
import { freshlyPlanned, typed, type Sql } from '../db.js';
import type { Deps } from '../deps.js';
import type { ErrorCode } from '../errors.js';
import { readFiles } from '../files/files.js';
import type { BlobStore } from '../files/storage.js';
import { derivedId } from '../ids.js';
import { scheduleDeliveries } from '../inbound/scheduled-deliveries.js';
import { byApp } from '../per-app.js';
import type { OutboundFile, PlatformError, PlatformName } from '../platforms/types.js';
import { systemEvent, systemEventType } from '../ledger/event-types.js';
import { catalogJob, enqueue, messageJobId, queueFor, type LedgerEvent } from '../queues.js';
import type { MessageRow } from './messages.js';
import type { PartyResolver, SendParties } from './parties.js';

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

/** What a claim writes: `sending`, one more attempt, the claimer and the end of its lease. */
const claimedBy = (sql: Sql, claim: string, leaseMs: number) =>
  sql`status = 'sending', attempts = attempts + 1, claimed_by = ${typed.uuid(sql, claim)},
       lease_until = now() + ${typed.int(sql, leaseMs)} * interval '1 millisecond'`;

/**
 * Whether a platform's sends may take a batch's fast path. An e-mail may not: a reply needs
 * its thread looked up first, which its own job does (so the web gives it one at once).
 */
export const batchable = (platform: PlatformName) => platform !== 'EMAIL';

/**
 * A message's own send job (dropped if it already has one), telling it who waits for the
 * outcome: queued by the web for a send that cannot go in a batch, and by a batch for what it
 * hands over. `reservedAttempt`: the attempt a budget slot was reserved for.
 */
export const ownSendJob = (m: { id: string; app_id: string }, replyTo: string | undefined, delayMs = 0, reservedAttempt?: number) =>
  catalogJob(
    'send',
    {
      message_id: m.id,
      app_id: m.app_id,
      reply_to: replyTo,
      ...(reservedAttempt !== undefined ? { reserved_attempt: reservedAttempt } : {}),
    },
    delayMs > 0 ? { delay: delayMs } : {},
  );

/**
 * Claims a batch job's messages that may take the fast path, in one statement, under `claim`
 * until the lease ends (committed before any call), and answers them as claimed (`status`
 * sending, `attempts` counting this claim). A message is claimed only if it is still queued,
 * carries no files, and no earlier message to its recipient is unsettled — unless that one is
 * in the batch and claimable too, so a recipient's messages of one batch go together, in order.
 * The rest are not this run's: their own jobs take them. (The connection is the caller's to
 * check: joined here, the planner drives the lookup from it through every message it has.)
 */
export async function claimBatch(
  deps: Deps,
  messages: { app_id: string; id: string }[],
  claim: string,
  leaseMs: number,
): Promise<MessageRow[]> {
  const claimed = await Promise.all(
    byApp(messages).map(([appId, ms]) => {
      const ids = typed.uuids(
        deps.sql,
        ms.map((m) => m.id),
      );
      return freshlyPlanned(deps.sql<MessageRow[]>`
        UPDATE outbound_messages m
           SET ${claimedBy(deps.sql, claim, leaseMs)}
         WHERE m.app_id = ${typed.uuid(deps.sql, appId)} AND m.id = ANY(${ids})
           AND m.status = 'queued' AND m.file_ids = '{}'
           AND NOT EXISTS (
                 SELECT 1 FROM outbound_messages p
                  WHERE p.app_id = m.app_id AND p.platform_connection_id = m.platform_connection_id AND p.to_external_id = m.to_external_id
                    AND p.recipient_seq < m.recipient_seq AND p.finished_at IS NULL
                    AND NOT (p.id = ANY(${ids}) AND p.status = 'queued' AND p.file_ids = '{}'))
        RETURNING m.*`);
    }),
  );
  return claimed.flat();
}

/** Whether an earlier message to the same recipient of the same connection is still unsettled. */
export async function hasEarlierPending(deps: Deps, msg: MessageRow): Promise<boolean> {
  const rows = await deps.sql`
    SELECT 1 FROM outbound_messages
     WHERE app_id = ${msg.app_id} AND platform_connection_id = ${msg.platform_connection_id} AND to_external_id = ${msg.to_external_id}
       AND recipient_seq < ${msg.recipient_seq} AND finished_at IS NULL
     LIMIT 1`;
  return rows.length > 0;
}

/**
 * Wakes the next message to the same recipient once this one is settled: it waits in
 * `delayed` for its predecessor, so ordering costs no polling. A promotion that misses (the
 * successor is not delayed yet) is covered by the successor re-checking after it delays itself.
 */
export async function promoteSuccessor(deps: Deps, msg: MessageRow): Promise<void> {
  const [next] = await deps.sql<{ id: string; app_id: string }[]>`
    SELECT id, app_id FROM outbound_messages
     WHERE app_id = ${msg.app_id} AND platform_connection_id = ${msg.platform_connection_id} AND to_external_id = ${msg.to_external_id}
       AND recipient_seq > ${msg.recipient_seq} AND finished_at IS NULL
     ORDER BY recipient_seq LIMIT 1`;
  if (next) await promoteSendJob(deps, next);
}

async function promoteSendJob(deps: Deps, message: { id: string; app_id: string }): Promise<void> {
  const job = await Job.fromId(queueFor(deps.queues, 'send', message.app_id), messageJobId(message.id));
  if (job && (await job.isDelayed())) await job.promote().catch(() => undefined);
}

/** `promoteSuccessor` for many settled messages: one query finds the next unsettled message of each recipient. */
export async function promoteSuccessors(deps: Deps, settled: MessageRow[]): Promise<void> {
  const last = new Map<string, MessageRow>();
  for (const m of settled) {
    const key = `${m.platform_connection_id}/${m.to_external_id}`;
    const seen = last.get(key);
    if (!seen || seen.recipient_seq < m.recipient_seq) last.set(key, m);
  }
  if (last.size === 0) return;
  const ms = [...last.values()];
  const next = await deps.sql<{ id: string; app_id: string }[]>`
    SELECT n.id, n.app_id FROM unnest(${ms.map((m) => m.app_id)}::uuid[], ${ms.map((m) => m.platform_connection_id)}::uuid[],
                            ${ms.map((m) => m.to_external_id)}::text[], ${ms.map((m) => m.recipient_seq)}::bigint[]) AS s(app_id, conn, to_id, seq)
    CROSS JOIN LATERAL (
      SELECT id, app_id FROM outbound_messages
       WHERE app_id = s.app_id AND platform_connection_id = s.conn AND to_external_id = s.to_id AND recipient_seq > s.seq AND finished_at IS NULL
       ORDER BY recipient_seq LIMIT 1) n`;
  await Promise.all(next.map((n) => promoteSendJob(deps, n)));
}

/**
 * How long a claim on a send lasts: every platform call it may make (one per file uploaded
 * first, the send, one spare), each bounded by PLATFORM_TIMEOUT_MS, and a margin. A claim
 * still held past it belongs to an owner that died or stalled.
 */
export const sendLeaseMs = (config: { PLATFORM_TIMEOUT_MS: number }, files = 0) => config.PLATFORM_TIMEOUT_MS * (2 + files) + 5_000;

/**
 * Claims queued messages for one platform call each, under `claim` (a fresh id per job run)
 * until the lease ends; committed before any call. Answers the ids claimed: a message another
 * job claimed, or that settled meanwhile, is not this run's to send.
 */
export async function claimSends(deps: Deps, appId: string, ids: string[], claim: string, leaseMs: number): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await freshlyPlanned(deps.sql<{ id: string }[]>`
    UPDATE outbound_messages SET ${claimedBy(deps.sql, claim, leaseMs)}
     WHERE app_id = ${typed.uuid(deps.sql, appId)} AND id = ANY(${typed.uuids(deps.sql, ids)}) AND status = 'queued' RETURNING id`);
  return new Set(rows.map((r) => r.id));
}

/** Gives claimed messages back unsent (their call was never made): queued again, the attempt not counted. */
export async function releaseClaims(deps: Deps, messages: { app_id: string; id: string }[], claim: string): Promise<void> {
  await Promise.all(
    byApp(messages).map(
      ([appId, ms]) => deps.sql`
        UPDATE outbound_messages SET status = 'queued', attempts = attempts - 1, claimed_by = NULL, lease_until = NULL
         WHERE app_id = ${appId} AND id = ANY(${ms.map((m) => m.id)}::uuid[]) AND status = 'sending' AND claimed_by = ${claim}`,
    ),
  );
}

/** A transient failure: back to queued (successors keep waiting), the error kept for GET /v1/messages/:id. */
export async function markRetrying(deps: Deps, msg: MessageRow, error: StoredError): Promise<void> {
  await deps.sql`
    UPDATE outbound_messages SET status = 'queued', error = ${deps.sql.json(error as never)}, claimed_by = NULL, lease_until = NULL
     WHERE app_id = ${msg.app_id} AND id = ${msg.id}`;
}

/** A final failure. With `onlyIfLeaseEnded`, only a message still `sending` under a lapsed claim (its owner died mid-call). */
export async function markFailed(deps: Deps, msg: MessageRow, error: StoredError, onlyIfLeaseEnded = false): Promise<boolean> {
  const rows = await deps.sql`
    UPDATE outbound_messages SET status = 'failed', error = ${deps.sql.json(error as never)}, finished_at = now(), claimed_by = NULL, lease_until = NULL
     WHERE app_id = ${msg.app_id} AND id = ${msg.id}
       AND (${!onlyIfLeaseEnded} OR (status = 'sending' AND (lease_until IS NULL OR lease_until <= now())))
     RETURNING 1`;
  return rows.length > 0;
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

/**
 * Records `message.outbound` under the message's own id (the id POST /v1/messages answered),
 * so a repeat writes nothing twice: `sent_to` the recipient's platform user (created on first
 * sight), `sent_by` the connection's system user.
 */
export function outboundEvent(msg: MessageRow, conn: Connection, externalMessageId: string, parties: SendParties): LedgerEvent {
  const { recipient, system, conversationId } = parties;
  return {
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
}

/**
 * A message found `sent` again (a repeat job): its event committed with it; handing the event
 * to the ledger once more writes nothing and re-runs what follows a commit (wakes, fan-out),
 * in case the first run died before those.
 */
export async function redriveSent(deps: Deps, parties: PartyResolver, msg: MessageRow, conn: Connection): Promise<void> {
  const [p] = await parties.resolve([{ msg, conn }]);
  await enqueue(deps.queues, 'ledger', { event: outboundEvent(msg, conn, msg.external_message_id ?? '', p) });
  // The platform's own later reports (the sandbox's) may not have been queued either.
  if (msg.external_message_id)
    await scheduleDeliveries(
      deps,
      [{ conn, externalMessageId: msg.external_message_id, to: msg.to_external_id }],
      msg.finished_at?.getTime(),
    );
}

/** A final failure: `message.status` with status failed, the error and the message id (id derived, so a repeat is one event). */
export async function recordFailed(
  deps: Deps,
  parties: PartyResolver,
  msg: MessageRow,
  conn: Connection,
  error: StoredError,
): Promise<void> {
  const [{ recipient, conversationId }] = await parties.resolve([{ msg, conn }]);
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

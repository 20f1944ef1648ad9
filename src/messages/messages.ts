import { z } from 'zod';
import type { ConnectionCache } from '../connections/connection-cache.js';
import type { Connection } from '../connections/connections.js';
import type { Sql } from '../db.js';
import type { Deps } from '../deps.js';
import { fail, ok, type ErrorCode, type Result } from '../errors.js';
import { claimIdempotencyKey } from '../idempotency.js';
import type { SendOutcome } from '../ledger/commit-reports.js';
import type { CommitWaiter, OutcomeCheck } from '../ledger/commit-waiter.js';
import { getAdapter } from '../platforms/registry.js';
import { enqueue } from '../queues.js';
import { isNotReplicated } from '../redis-durability.js';
import { deleteInBatches } from '../retention/batched-delete.js';
import { replyPolicyOf, replyWindow } from '../conversations/reply-window.js';
import { batchable } from './delivery.js';
import type { MessageRecorder } from './record.js';

export const sendMessageInput = z
  .strictObject({
    platform_connection_id: z.string().min(1).max(100),
    to_external_id: z.string().trim().min(1).max(320),
    message: z.string().max(100_000),
    file_ids: z.array(z.uuid()).max(10).optional(),
    /** Telegram formatting. */
    parse_mode: z.enum(['MarkdownV2', 'HTML']).optional(),
    /** E-mail subject; defaults to the first line of the message. */
    subject: z.string().max(998).optional(),
  })
  .refine((m) => m.message.length > 0 || (m.file_ids?.length ?? 0) > 0, { message: 'message must not be empty', path: ['message'] });
export type SendMessageInput = z.infer<typeof sendMessageInput>;

export interface MessageRow {
  id: string;
  app_id: string;
  platform_connection_id: string;
  to_external_id: string;
  recipient_seq: number;
  text: string;
  options: { parse_mode?: 'MarkdownV2' | 'HTML'; subject?: string };
  file_ids: string[];
  status: 'queued' | 'sending' | 'sent' | 'failed';
  external_message_id: string | null;
  error: { code: ErrorCode; message: string; platform_code?: string | number; platform_message?: string } | null;
  attempts: number;
  /** The claim the message is being sent under (a job run's id), while `sending`. */
  claimed_by: string | null;
  /** When that claim lapses. */
  lease_until: Date | null;
  created_at: Date;
  finished_at: Date | null;
}

/**
 * A message's outcome once it is sent or finally failed: what POST /v1/messages waits for
 * (settled by the send worker's report; this is the periodic check behind it). `sent` and its
 * message.outbound event commit together, so a sent message can be read back at once.
 */
export const messageOutcome: OutcomeCheck<SendOutcome> = async (sql, appId, ids) =>
  (
    await sql<Pick<MessageRow, 'id' | 'status' | 'external_message_id' | 'error'>[]>`
      SELECT id, status, external_message_id, error FROM outbound_messages
       WHERE app_id = ${appId} AND id = ANY(${ids}::uuid[]) AND status IN ('sent', 'failed')`
  ).map((r): [string, SendOutcome] => [
    r.id,
    r.status === 'sent' ? { status: 'sent', external_message_id: r.external_message_id ?? '' } : { status: 'failed', error: r.error! },
  ]);

/** What a send request is answered with: the message's state when the wait ended. */
export interface SubmittedMessage {
  id: string;
  status: MessageRow['status'];
  external_message_id: string | null;
  error: MessageRow['error'];
  created_at: Date;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Validates a send, records it, enqueues it on `send` and waits (bounded) for the outcome.
 * Everything knowable before calling the platform is checked here, so those refusals are
 * synchronous 4xx answers that write nothing.
 */
export async function submitMessage(
  deps: Deps,
  services: { sends: CommitWaiter<SendOutcome>; connections: ConnectionCache; recorder: MessageRecorder },
  appId: string,
  input: SendMessageInput,
  idempotencyKey?: string,
): Promise<Result<SubmittedMessage>> {
  const conn = UUID.test(input.platform_connection_id) ? await services.connections.get(appId, input.platform_connection_id) : undefined;
  const notFound = () =>
    fail('PLATFORM_CONNECTION_NOT_FOUND', `Platform connection ${input.platform_connection_id} not found`, [
      { path: ['platform_connection_id'], message: 'not found' },
    ]);
  if (!conn) return notFound();
  if (conn.status !== 'ACTIVE') return fail('CONNECTION_DISABLED', `Platform connection ${conn.id} is disabled`);
  const adapter = getAdapter(conn.platform);
  const badTo = adapter.checkRecipient(input.to_external_id);
  if (badTo) return fail('INVALID_RECIPIENT', badTo, [{ path: ['to_external_id'], message: badTo }]);
  if (adapter.maxTextLength !== undefined && [...input.message].length > adapter.maxTextLength) {
    return fail(
      'MESSAGE_TOO_LONG',
      `${conn.platform} accepts at most ${adapter.maxTextLength} characters; this message has ${[...input.message].length}`,
      [{ path: ['message'], message: `longer than ${adapter.maxTextLength} characters` }],
    );
  }
  if (input.file_ids?.length) {
    if (!adapter.acceptsFiles)
      return fail('VALIDATION_ERROR', `${conn.platform} connections send text only`, [
        { path: ['file_ids'], message: `files are not supported on ${conn.platform}` },
      ]);
    const found = await deps.sql<{ id: string }[]>`SELECT id FROM files WHERE app_id = ${appId} AND id = ANY(${input.file_ids}::uuid[])`;
    const have = new Set(found.map((f) => f.id));
    const missing = input.file_ids.map((id, i) => ({ id, i })).filter((f) => !have.has(f.id));
    if (missing.length)
      return fail(
        'VALIDATION_ERROR',
        `Unknown file ${missing[0].id}`,
        missing.map((m) => ({ path: ['file_ids', m.i], message: `file ${m.id} not found` })),
      );
  }
  const window = await replyWindowClosed(deps, conn, input.to_external_id);
  if (window) return fail('REPLY_WINDOW_CLOSED', window);

  const claim = await claimIdempotencyKey(deps.sql, appId, 'messages', idempotencyKey, input);
  if (!claim.ok) return claim;
  const id = claim.value.resourceId;
  const options = { ...(input.parse_mode ? { parse_mode: input.parse_mode } : {}), ...(input.subject ? { subject: input.subject } : {}) };
  const [earlier] = claim.value.replay
    ? await deps.sql<Pick<MessageRow, 'status' | 'external_message_id' | 'error' | 'created_at'>[]>`
        SELECT status, external_message_id, error, created_at FROM outbound_messages WHERE app_id = ${appId} AND id = ${id}`
    : [];
  let createdAt: Date;
  let settled: Promise<SendOutcome | undefined>;
  if (earlier) {
    // A replayed key finds its message: answer its state, waiting (bounded) if it is still
    // under way. Re-driving its job is harmless: the job id is the message id, and the worker
    // does nothing for a message already settled.
    createdAt = earlier.created_at;
    if (earlier.status === 'sent' || earlier.status === 'failed') return ok({ id, ...earlier });
    settled = services.sends.wait(appId, id, deps.config.SEND_WAIT_MS);
    await enqueue(deps.queues, 'send', { message_id: id, app_id: appId }).catch(async (err) => {
      if (!(await settledDespite(err, settled))) throw err;
    });
  } else {
    // New, or a replayed key whose first request died between claiming the key and recording
    // the message (a database restart): recorded now, from the same body (the key's hash
    // guarantees it), with the other sends of this turn, and handed to the workers with them.
    settled = services.sends.wait(appId, id, deps.config.SEND_WAIT_MS);
    try {
      createdAt = await services.recorder({
        id,
        appId,
        connectionId: conn.id,
        to: input.to_external_id,
        text: input.message,
        options,
        fileIds: input.file_ids ?? [],
        // Files are uploaded first: the batch's claim leaves such a send to its own job too.
        alone: !batchable(conn.platform) || (input.file_ids?.length ?? 0) > 0,
      });
    } catch (err) {
      const outcome = await settledDespite(err, settled);
      if (outcome) {
        const [row] = await deps.sql<
          { created_at: Date }[]
        >`SELECT created_at FROM outbound_messages WHERE app_id = ${appId} AND id = ${id}`;
        return settledAnswer(id, row.created_at, outcome);
      }
      services.sends.settle(appId, id, undefined);
      // A foreign key violation: the connection was deleted and this process's cache missed the
      // announcement (see src/connections/connection-cache.ts). Unknown, as without the cache.
      if ((err as { code?: string }).code === '23503') return notFound();
      throw err;
    }
  }
  const outcome = await settled;
  if (!outcome) return ok({ id, status: 'queued', external_message_id: null, error: null, created_at: createdAt });
  return settledAnswer(id, createdAt, outcome);
}

function settledAnswer(id: string, createdAt: Date, outcome: SendOutcome): Result<SubmittedMessage> {
  return ok(
    outcome.status === 'sent'
      ? { id, status: 'sent', external_message_id: outcome.external_message_id, error: null, created_at: createdAt }
      : { id, status: 'failed', external_message_id: null, error: outcome.error, created_at: createdAt },
  );
}

/**
 * The outcome of a send whose enqueue failed, when it settled anyway. A job on its master but
 * on no replica (REDIS_WAIT_REPLICAS) is not safe to call queued, but one the worker sent or
 * failed within the wait is in PostgreSQL, which no Redis failover takes back: answered as
 * settled, as an event committed within its wait is a 201 (src/ledger/submit.ts).
 */
async function settledDespite(err: unknown, settled: Promise<SendOutcome | undefined>): Promise<SendOutcome | undefined> {
  return isNotReplicated(err) ? await settled : undefined;
}

/**
 * Platforms with a `window_24h` reply policy only allow free-form replies within 24 h of the
 * user's last message. When we have seen the conversation and its last inbound is older than that,
 * fail fast without calling the platform; when we know nothing, the platform decides.
 */
async function replyWindowClosed(deps: Deps, conn: Pick<Connection, 'appId' | 'id' | 'platform'>, to: string): Promise<string | undefined> {
  const { platform } = conn;
  if (replyPolicyOf(platform, to) !== 'window_24h') return undefined;
  const [conv] = await deps.sql<{ last_inbound_at: Date | null }[]>`
    SELECT max(last_inbound_at) AS last_inbound_at FROM conversations
     WHERE app_id = ${conn.appId} AND platform_connection_id = ${conn.id} AND external_id IN (${to}, ${to.replace(/^\+/, '')})`;
  const w = replyWindow(platform, to, conv?.last_inbound_at ?? null);
  if (w.open !== false) return undefined;
  return `The 24-hour reply window for ${to} closed at ${w.closes_at}; a template message is needed`;
}

export async function getMessage(deps: Deps, appId: string, id: string): Promise<MessageRow | undefined> {
  if (!UUID.test(id)) return undefined;
  const [row] = await deps.sql<MessageRow[]>`SELECT * FROM outbound_messages WHERE app_id = ${appId} AND id = ${id}`;
  return row;
}

/**
 * Deletes message records settled (sent or failed) more than `days` ago (MESSAGE_RETENTION_DAYS,
 * 0 = never), in bounded chunks. Their outcome stays in the ledger (message.outbound,
 * message.status); GET /v1/messages/:id answers 404 for them, and a late platform status for
 * one is recorded without its origin. Unsettled messages are never touched: later sends to the
 * same recipient wait on them.
 */
export async function pruneMessages(sql: Sql, days: number): Promise<number> {
  if (days === 0) return 0;
  return deleteInBatches(
    async (limit) =>
      (
        await sql`
    DELETE FROM outbound_messages WHERE (app_id, id) IN (
      SELECT app_id, id FROM outbound_messages
       WHERE finished_at < now() - ${days} * interval '1 day' AND status IN ('sent', 'failed') LIMIT ${limit})`
      ).count,
  );
}

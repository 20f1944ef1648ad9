import { setTimeout as sleep } from 'node:timers/promises';
import { DelayedError } from 'bullmq';
import { untilAvailable } from '../src/availability.js';
import { dedicatedWebhookUrl, recordHealth } from '../src/connections/connections.js';
import {
  hasEarlierPending,
  inboundToReplyTo,
  loadFiles,
  loadMessage,
  markFailed,
  markRetrying,
  markSending,
  markSent,
  promoteSuccessor,
  recordFailed,
  recordSent,
  storedError,
} from '../src/messages/delivery.js';
import { holdConnection, paceSend, reserveSendSlot } from '../src/platforms/rate-budget.js';
import { getAdapter } from '../src/platforms/registry.js';
import type { ProcessorDef } from './host.js';

/**
 * A send waiting for its predecessor is woken by that predecessor's settlement; this is only
 * the safety net for a wake lost to a crash between the two.
 */
const ORDER_FALLBACK_MS = 30_000;
/** Waits up to this long are slept in the job; longer ones move it to delayed. */
const PACE_SLEEP_MAX_MS = 250;
/** BullMQ wakes delayed jobs on Redis's ~100 ms timer tick: wake this much before the slot. */
const WAKE_EARLY_MS = 120;

/**
 * The send queue: one platform call per job, in order per recipient, within the platform's
 * budgets. Waiting (for a predecessor, a budget slot, a platform's retry-after) moves the job
 * to delayed without using up an attempt or holding a worker slot.
 */
export const sendProcessor: ProcessorDef<'send'> = {
  queue: 'send',
  create(deps, services) {
    return async (job, token) => {
      const data = job.data;
      const msg = await loadMessage(deps, data.app_id, data.message_id);
      if (!msg) return { skipped: 'unknown message' };
      const [conn, waitsForEarlier] = await Promise.all([
        services.connections.get(data.app_id, msg.platform_connection_id),
        hasEarlierPending(deps, msg),
      ]);
      if (!conn) {
        // Deleting a connection deletes its messages; this only covers the moment in between.
        await markFailed(deps, msg, storedError({ code: 'PLATFORM_CONNECTION_NOT_FOUND', message: 'The platform connection was deleted' }));
        return { status: 'failed' };
      }
      // Already settled (a repeat, or a crash after the update): make sure its event exists and wake the next one.
      if (msg.status === 'sent') {
        await recordSent(deps, msg, conn, msg.external_message_id!);
        await promoteSuccessor(deps, msg);
        return { status: 'sent' };
      }
      if (msg.status === 'failed') {
        await promoteSuccessor(deps, msg);
        return { status: 'failed' };
      }
      const delay = async (ms: number) => {
        await job.moveToDelayed(Date.now() + ms, token);
        throw new DelayedError();
      };
      const finalFailure = async (error: ReturnType<typeof storedError>) => {
        await markFailed(deps, msg, error);
        await recordFailed(deps, msg, conn, error);
        await promoteSuccessor(deps, msg);
        return { status: 'failed', error: error.code };
      };

      // `sending` on arrival: an earlier attempt called the platform and died (or could not
      // record the answer) before settling. The platform may have the message; sending again
      // could deliver it twice, so the message fails as uncertain and the client decides.
      if (msg.status === 'sending') {
        return finalFailure(
          storedError({
            code: 'DELIVERY_UNCERTAIN',
            message:
              'Sending was interrupted while the platform call was in flight; the platform may or may not have delivered it, so it was not sent again',
          }),
        );
      }
      if (conn.status !== 'ACTIVE')
        return finalFailure(
          storedError({ code: 'CONNECTION_DISABLED', message: `Platform connection ${conn.id} was disabled before the message went out` }),
        );

      if (waitsForEarlier) {
        await job.moveToDelayed(Date.now() + ORDER_FALLBACK_MS, token);
        // The predecessor may have settled between the check and the move, and found this job
        // still active when it tried to wake it: look once more now that the job is delayed.
        if (!(await hasEarlierPending(deps, msg))) await job.promote().catch(() => undefined);
        throw new DelayedError();
      }

      // Reserve a slot once per attempt; a job whose slot is further off than a short pause
      // waits for it in delayed, woken a little early so the pacing below can place it exactly.
      if (data.reserved_attempt !== msg.attempts) {
        const wait = await reserveSendSlot(deps.redis, deps.config.REDIS_PREFIX, conn.platform, conn.id, msg.to_external_id);
        if (wait > PACE_SLEEP_MAX_MS) {
          await job.updateData({ ...data, reserved_attempt: msg.attempts });
          return delay(wait - WAKE_EARLY_MS);
        }
      }
      const [files, inReplyTo] = await Promise.all([
        loadFiles(deps, services.files, msg),
        conn.platform === 'EMAIL' ? inboundToReplyTo(deps, msg) : undefined,
      ]);
      const outbound = {
        to: msg.to_external_id,
        text: msg.text,
        parseMode: msg.options.parse_mode,
        subject: msg.options.subject,
        files,
        inReplyTo,
      };
      // Paced last, so as little as possible lies between the budget's clock and the platform's.
      for (;;) {
        const wait = await paceSend(deps.redis, deps.config.REDIS_PREFIX, conn.platform, conn.id, msg.to_external_id);
        if (wait === 0) break;
        if (wait > PACE_SLEEP_MAX_MS) {
          // Behind a platform's hold: the slot reserved for this attempt still stands, so keep it.
          if (data.reserved_attempt !== msg.attempts) await job.updateData({ ...data, reserved_attempt: msg.attempts });
          return delay(wait);
        }
        await sleep(wait);
      }
      if (!(await markSending(deps, msg))) return { skipped: 'settled elsewhere' };
      const outcome = await getAdapter(conn.platform).send(conn.config, outbound, {
        timeoutMs: deps.config.PLATFORM_TIMEOUT_MS,
        defaultBaseUrl: deps.config.PLATFORM_API_BASES[conn.platform],
        webhookUrl: dedicatedWebhookUrl(deps, conn),
        // The operator's PLATFORM_API_BASES are trusted; a tenant's api_base_url (and the real platforms) go through the policy.
        guarded:
          deps.config.OUTBOUND_ADDRESS_POLICY === 'public-https' &&
          (conn.config.api_base_url !== undefined || !deps.config.PLATFORM_API_BASES[conn.platform]),
      });
      if (outcome.ok) {
        // The row first, and it must outlast a database blip: the platform has the message, so a
        // repeat of this job must find it sent rather than send it twice. A successor may go once
        // it reads `sent`; the rest is independent.
        await untilAvailable(() => markSent(deps, msg, outcome.externalMessageId));
        await Promise.all([
          recordHealth(deps, conn.id, { ok: true }),
          recordSent(deps, msg, conn, outcome.externalMessageId),
          promoteSuccessor(deps, msg),
        ]);
        return { status: 'sent', external_message_id: outcome.externalMessageId };
      }

      const error = outcome.error;
      // Bad credentials and an unreachable platform are the connection's health; a refused recipient is not.
      if (error.code === 'PLATFORM_AUTH_FAILED' || error.code === 'PLATFORM_UNAVAILABLE') {
        await recordHealth(deps, conn.id, { ok: false, error: `${error.code}: ${error.message}` });
      }
      const stored = storedError(error);
      const attempts = msg.attempts + 1;
      if (!error.retryable || attempts >= (job.opts.attempts ?? 1)) return finalFailure(stored);
      await untilAvailable(() => markRetrying(deps, msg, stored));
      if (error.retryAfterMs !== undefined) {
        // The platform named its own wait: honour it for this job and for the whole connection,
        // without spending a BullMQ attempt (attempts are still bounded by the message's count).
        await holdConnection(deps.redis, deps.config.REDIS_PREFIX, conn.platform, conn.id, error.retryAfterMs);
        return delay(error.retryAfterMs);
      }
      // BullMQ's backoff schedules the retry; the reservation was for this attempt only (attempts moved on).
      throw new Error(`${error.code}: ${error.message}`);
    };
  },
  options: (deps) => ({ concurrency: deps.config.SEND_CONCURRENCY }),
};

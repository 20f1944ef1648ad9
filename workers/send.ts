import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { DelayedError, type Job } from 'bullmq';
import { untilAvailable } from '../src/availability.js';
import type { ConnectionCache } from '../src/connections/connection-cache.js';
import { dedicatedWebhookUrl, recordHealth, type Connection } from '../src/connections/connections.js';
import type { Deps } from '../src/deps.js';
import type { BlobStore } from '../src/files/storage.js';
import { addSendReports, reportChannels, type SendOutcome } from '../src/ledger/commit-reports.js';
import { type Outgoing, publishAll } from '../src/pubsub.js';
import {
  batchable,
  claimBatch,
  claimSends,
  hasEarlierPending,
  inboundToReplyTo,
  loadFiles,
  ownSendJob,
  loadMessage,
  markFailed,
  markRetrying,
  promoteSuccessor,
  recordFailed,
  redriveSent,
  releaseClaims,
  sendLeaseMs,
  storedError,
  type StoredError,
} from '../src/messages/delivery.js';
import type { MessageRow } from '../src/messages/messages.js';
import { createPartyResolver, type PartyResolver, type SendParties } from '../src/messages/parties.js';
import { createSentSettler, resolvePartiesAhead, type SettleSent } from '../src/messages/settle.js';
import { admitSends, holdConnection, paceSend, reserveSendSlot } from '../src/platforms/rate-budget.js';
import { getAdapter } from '../src/platforms/registry.js';
import type { OutboundMessage, PlatformError, SendOutcome as PlatformOutcome } from '../src/platforms/types.js';
import { enqueueBulk, JOBS, type JobData } from '../src/queues.js';
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
/** Platform calls a message may take, retries included (its per-message job's attempts). */
const SEND_ATTEMPTS = JOBS.send.options.attempts;
/** The first retry of a send that failed in a batch: the per-message job's backoff takes over from there. */
const FIRST_RETRY_MS = JOBS.send.options.backoff.delay;

type MessageJob = Extract<JobData<'send'>, { message_id: string }>;
type BatchJob = Extract<JobData<'send'>, { kind: 'batch' }>;

/** What the send jobs of one worker process share. */
interface SendContext {
  deps: Deps;
  connections: ConnectionCache;
  parties: PartyResolver;
  settleSent: SettleSent;
  /** Where file bytes live (undefined: PostgreSQL). */
  files: BlobStore | undefined;
}

/**
 * The send queue. A batch job carries the sends one web process accepted in one turn of its
 * event loop — the fast path: one statement claims and loads the ones that may go now, one
 * round of budget scripts admits them, the platform calls run concurrently (in order per
 * recipient), and the accepted ones are recorded by the group commit. Anything that must wait (an earlier
 * message still unsettled, a budget, a retry, files, e-mail threading) goes to the message's
 * own job, which waits in `delayed` without holding a worker slot. Either way a message is
 * sent only under a claim with a lease, so two jobs never both call the platform for it.
 */
export const sendProcessor: ProcessorDef<'send'> = {
  queue: 'send',
  create(deps, services) {
    const parties = createPartyResolver(deps, services.connections);
    const ctx: SendContext = {
      deps,
      connections: services.connections,
      parties,
      settleSent: createSentSettler(deps, services, parties),
      files: services.files,
    };
    return async (job, token) =>
      job.data.kind === 'batch' ? sendBatch(ctx, job.data) : sendOne(ctx, job as Job<MessageJob>, job.data as MessageJob, token);
  },
  options: (deps) => ({ concurrency: deps.config.SEND_CONCURRENCY }),
};

/** Tells the waiting web process (if any) how a send ended. */
async function report(deps: Deps, replyTo: string | undefined, msg: MessageRow, outcome: SendOutcome): Promise<void> {
  if (!replyTo) return;
  const out: Outgoing[] = [];
  addSendReports(out, reportChannels(deps.config), [{ replyTo, appId: msg.app_id, id: msg.id, outcome }]);
  await publishAll(deps.redis, reportChannels(deps.config), out);
}

/** A final failure: stored, recorded as message.status failed, reported, and the recipient's next message woken. */
async function failFinal(ctx: SendContext, msg: MessageRow, conn: Connection, error: StoredError, replyTo?: string) {
  const { deps } = ctx;
  await markFailed(deps, msg, error);
  await recordFailed(deps, ctx.parties, msg, conn, error);
  await Promise.all([promoteSuccessor(deps, msg), report(deps, replyTo, msg, { status: 'failed', error })]);
  return { status: 'failed', error: error.code };
}

/** The platform call of one claimed message, with the service's bounds and address policy. */
function callPlatform(deps: Deps, conn: Connection, outbound: OutboundMessage): Promise<PlatformOutcome> {
  return getAdapter(conn.platform).send(conn.config, outbound, {
    timeoutMs: deps.config.PLATFORM_TIMEOUT_MS,
    defaultBaseUrl: deps.config.PLATFORM_API_BASES[conn.platform],
    webhookUrl: dedicatedWebhookUrl(deps, conn),
    // The operator's PLATFORM_API_BASES are trusted; any address the tenant gave (api_base_url,
    // an e-mail connection's smtp_url) and the real platforms go through the policy.
    guarded:
      deps.config.OUTBOUND_ADDRESS_POLICY === 'public-https' &&
      (Object.keys(getAdapter(conn.platform).addressFields).some((field) => conn.config[field] !== undefined) ||
        !deps.config.PLATFORM_API_BASES[conn.platform]),
  });
}

const textOnly = (msg: MessageRow): OutboundMessage => ({
  to: msg.to_external_id,
  text: msg.text,
  parseMode: msg.options.parse_mode,
  subject: msg.options.subject,
});

/** A platform named its own wait (429 retry-after): nothing more goes out on the connection until then. */
const holdFor = (deps: Deps, conn: Connection, ms: number) =>
  holdConnection(deps.redis, deps.config.REDIS_PREFIX, conn.platform, conn.id, ms, deps.config.PLATFORM_RATE_BUDGETS);

/** Bad credentials and an unreachable platform are the connection's health; a refused recipient is not. */
async function noteFailure(deps: Deps, conn: Connection, error: PlatformError): Promise<void> {
  if (error.code === 'PLATFORM_AUTH_FAILED' || error.code === 'PLATFORM_UNAVAILABLE') {
    await recordHealth(deps, conn, { ok: false, error: `${error.code}: ${error.message}` });
  }
}

/** One message's job: the slow path, and the one that waits. */
async function sendOne(ctx: SendContext, job: Job<MessageJob>, data: MessageJob, token: string | undefined) {
  const { deps } = ctx;
  const msg = await loadMessage(deps, data.app_id, data.message_id);
  if (!msg) return { skipped: 'unknown message' };
  const [conn, waitsForEarlier] = await Promise.all([
    ctx.connections.get(data.app_id, msg.platform_connection_id),
    hasEarlierPending(deps, msg),
  ]);
  const delay = async (ms: number) => {
    await job.moveToDelayed(Date.now() + ms, token);
    throw new DelayedError();
  };
  if (!conn) {
    // Deleting a connection deletes its messages; this only covers the moment in between.
    const error = storedError({ code: 'PLATFORM_CONNECTION_NOT_FOUND', message: 'The platform connection was deleted' });
    await markFailed(deps, msg, error);
    await report(deps, data.reply_to, msg, { status: 'failed', error });
    return { status: 'failed' };
  }
  // Already settled (a repeat, or a crash after the commit): make sure what follows the
  // commit happened, answer, and wake the next one.
  if (msg.status === 'sent') {
    await redriveSent(deps, ctx.parties, msg, conn);
    await Promise.all([
      promoteSuccessor(deps, msg),
      report(deps, data.reply_to, msg, { status: 'sent', external_message_id: msg.external_message_id ?? '' }),
    ]);
    return { status: 'sent' };
  }
  if (msg.status === 'failed') {
    await Promise.all([promoteSuccessor(deps, msg), report(deps, data.reply_to, msg, { status: 'failed', error: msg.error! })]);
    return { status: 'failed' };
  }

  if (msg.status === 'sending') {
    // Another run holds a live claim (a batch job, or this job before a stall): its call may be
    // in flight. Wait for the claim to settle or lapse.
    const leaseLeft = msg.lease_until ? msg.lease_until.getTime() - Date.now() : 0;
    if (leaseLeft > 0) return delay(leaseLeft + 250);
    // A lapsed claim: an earlier run called the platform and died (or could not record the
    // answer) before settling. The platform may have the message; sending again could deliver
    // it twice, so the message fails as uncertain and the client decides.
    const error = storedError({
      code: 'DELIVERY_UNCERTAIN',
      message:
        'Sending was interrupted while the platform call was in flight; the platform may or may not have delivered it, so it was not sent again',
    });
    if (!(await markFailed(deps, msg, error, true))) return { skipped: 'settled elsewhere' };
    await recordFailed(deps, ctx.parties, msg, conn, error);
    await Promise.all([promoteSuccessor(deps, msg), report(deps, data.reply_to, msg, { status: 'failed', error })]);
    return { status: 'failed', error: error.code };
  }
  if (conn.status !== 'ACTIVE')
    return failFinal(
      ctx,
      msg,
      conn,
      storedError({ code: 'CONNECTION_DISABLED', message: `Platform connection ${conn.id} was disabled before the message went out` }),
      data.reply_to,
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
    const wait = await reserveSendSlot(
      deps.redis,
      deps.config.REDIS_PREFIX,
      conn.platform,
      conn.id,
      msg.to_external_id,
      deps.config.PLATFORM_RATE_BUDGETS,
    );
    if (wait > PACE_SLEEP_MAX_MS) {
      await job.updateData({ ...data, reserved_attempt: msg.attempts });
      return delay(wait - WAKE_EARLY_MS);
    }
  }
  const [files, inReplyTo] = await Promise.all([
    loadFiles(deps, ctx.files, msg),
    conn.platform === 'EMAIL' ? inboundToReplyTo(deps, msg) : undefined,
  ]);
  const outbound: OutboundMessage = { ...textOnly(msg), files, inReplyTo };
  // Paced last, so as little as possible lies between the budget's clock and the platform's.
  const wait = await pace(deps, conn, msg);
  if (wait > 0) {
    // Behind a platform's hold: the slot reserved for this attempt still stands, so keep it.
    if (data.reserved_attempt !== msg.attempts) await job.updateData({ ...data, reserved_attempt: msg.attempts });
    return delay(wait);
  }
  const claim = randomUUID();
  if (!(await claimSends(deps, msg.app_id, [msg.id], claim, sendLeaseMs(deps.config, msg.file_ids.length))).has(msg.id))
    return { skipped: 'claimed or settled elsewhere' };
  const [parties] = resolvePartiesAhead(ctx.parties, [{ msg, conn }]);
  const outcome = await callPlatform(deps, conn, outbound);
  if (outcome.ok) {
    // It must outlast a database blip: the platform has the message, so a repeat of this job
    // must find it sent rather than send it twice.
    await untilAvailable(() =>
      ctx.settleSent({ msg, conn, externalMessageId: outcome.externalMessageId, claim, replyTo: data.reply_to, parties }),
    );
    return { status: 'sent', external_message_id: outcome.externalMessageId };
  }

  const error = outcome.error;
  await noteFailure(deps, conn, error);
  const stored = storedError(error);
  if (!error.retryable || msg.attempts + 1 >= (job.opts.attempts ?? 1)) return failFinal(ctx, msg, conn, stored, data.reply_to);
  await untilAvailable(() => markRetrying(deps, msg, stored));
  if (error.retryAfterMs !== undefined) {
    // The platform named its own wait: honour it for this job and for the whole connection,
    // without spending a BullMQ attempt (attempts are still bounded by the message's count).
    await holdFor(deps, conn, error.retryAfterMs);
    return delay(error.retryAfterMs);
  }
  // BullMQ's backoff schedules the retry; the reservation was for this attempt only (attempts moved on).
  throw new Error(`${error.code}: ${error.message}`);
}

/** A web process's batch: the fast path. */
async function sendBatch(ctx: SendContext, data: BatchJob) {
  const { deps } = ctx;
  // Claimed first, by the statement that loads them: the database decides what may go now
  // (queued, no files, nothing earlier to wait for), so nothing is spent on a message that is
  // not this run's.
  const claim = randomUUID();
  const claimed = await claimBatch(deps, data.messages, claim, sendLeaseMs(deps.config));
  let fast: Admitted[][];
  try {
    fast = await admitClaimed(ctx, data, claimed, claim);
  } catch (err) {
    // No platform call was made: the claims go back, and the job's retry claims them again
    // (left claimed, they would end as DELIVERY_UNCERTAIN once their lease ran out).
    await releaseClaims(deps, claimed, claim).catch(() => undefined);
    throw err;
  }
  // The parties (recipient, account, conversation) are found or created while the calls are
  // under way, one round trip for the batch, rather than inside the serial group commit.
  const flat = fast.flat();
  const ahead = resolvePartiesAhead(ctx.parties, flat);
  for (const [i, a] of flat.entries()) a.parties = ahead[i];
  const results = await Promise.all(fast.map((g) => sendInOrder(ctx, g, claim, data.reply_to)));
  return { fast: flat.length, slow: data.messages.length - flat.length, sent: results.reduce((n, r) => n + r, 0) };
}

/**
 * The claimed messages' budgets, and what cannot go now handed to its own job: the messages the
 * claim did not take, and those given back — behind a slot too far off, or of a connection that
 * cannot go fast. Answers what goes now, per recipient in sequence order.
 */
async function admitClaimed(ctx: SendContext, data: BatchJob, claimed: MessageRow[], claim: string): Promise<Admitted[][]> {
  const { deps } = ctx;
  const conns = new Map<string, Connection | undefined>();
  await Promise.all(
    [...new Set(claimed.map((m) => `${m.app_id}/${m.platform_connection_id}`))].map(async (key) => {
      const [appId, connId] = key.split('/');
      conns.set(key, await ctx.connections.get(appId, connId));
    }),
  );
  const connOf = (m: MessageRow) => conns.get(`${m.app_id}/${m.platform_connection_id}`);

  // Per recipient in sequence order. A recipient whose connection is not active, or is e-mail
  // (`batchable`: the web gives those their own job; one recorded by an older release may
  // still come in a batch), is given back unsent.
  const byRecipient = new Map<string, MessageRow[]>();
  for (const m of claimed) {
    const key = `${m.platform_connection_id}/${m.to_external_id}`;
    const group = byRecipient.get(key);
    if (group) group.push(m);
    else byRecipient.set(key, [m]);
  }
  const groups = [...byRecipient.values()].map((g) => g.sort((a, b) => a.recipient_seq - b.recipient_seq));
  const fastPath = (conn: Connection | undefined) => conn?.status === 'ACTIVE' && batchable(conn.platform);
  const cut = groups.map((g) => (fastPath(connOf(g[0])) ? g.length : 0));
  // Budgets in rounds (the first message of every recipient, then the second…), so a message
  // whose slot is too far off has reserved nothing for the ones behind it. A slot within a
  // short pause is slept in this job; a later one is kept and handed to the message's own job.
  const fast: Admitted[][] = groups.map(() => []);
  const reserved: { m: MessageRow; waitMs: number }[] = [];
  for (let round = 0; ; round++) {
    const here = groups.flatMap((g, gi) => (round < cut[gi] ? [{ m: g[round], gi }] : []));
    if (here.length === 0) break;
    const admitted = await admitSends(
      deps.redis,
      deps.config.REDIS_PREFIX,
      here.map(({ m }) => ({ platform: connOf(m)!.platform, connectionId: m.platform_connection_id, recipient: m.to_external_id })),
      deps.config.PLATFORM_RATE_BUDGETS,
    );
    const at = Date.now();
    for (const [k, { m, gi }] of here.entries()) {
      const { waitMs, paced } = admitted[k];
      if (paced || waitMs <= PACE_SLEEP_MAX_MS) fast[gi].push({ msg: m, conn: connOf(m)!, paced, at: at + waitMs });
      else {
        reserved.push({ m, waitMs });
        cut[gi] = round + 1;
      }
    }
  }
  // Given back before their own jobs are queued (a job finding its message still claimed
  // would wait out the lease); the reserved ones' own jobs keep their slots.
  const behind = groups.flatMap((g, gi) => g.slice(cut[gi]));
  await releaseClaims(deps, [...reserved.map((r) => r.m), ...behind], claim);
  // In one round trip, before any platform call of this run can fail.
  const taken = new Set(claimed.map((m) => m.id));
  const waiting = [
    ...data.messages.filter((m) => !taken.has(m.id)).map((m) => ownSendJob(m, data.reply_to)),
    ...behind.map((m) => ownSendJob(m, data.reply_to)),
    // The attempt the reservation is for: the claim counted one, its release took it back.
    ...reserved.map(({ m, waitMs }) => ownSendJob(m, data.reply_to, waitMs - WAKE_EARLY_MS, m.attempts - 1)),
  ];
  if (waiting.length) await enqueueBulk(deps.queues, 'send', waiting);
  return fast.filter((g) => g.length > 0);
}

/** A message of a batch admitted to go: now (paced), or at `at` once pacing allows. */
interface Admitted {
  msg: MessageRow;
  /** Its connection, as the batch loaded it. */
  conn: Connection;
  paced: boolean;
  at: number;
  /** Its parties, being resolved beside the calls. */
  parties?: Promise<SendParties | undefined>;
}

/** Queues each message's own job. */
async function handOver(deps: Deps, msgs: MessageRow[], replyTo: string | undefined, delayMs = 0): Promise<void> {
  await enqueueBulk(
    deps.queues,
    'send',
    msgs.map((m) => ownSendJob(m, replyTo, delayMs)),
  );
}

/**
 * Paces a send (`paceSend`), sleeping out short waits: 0 once it may go, or a wait longer than
 * a short pause (a platform's hold on the connection), with nothing spent.
 */
async function pace(deps: Deps, conn: Connection, msg: MessageRow): Promise<number> {
  for (;;) {
    const wait = await paceSend(
      deps.redis,
      deps.config.REDIS_PREFIX,
      conn.platform,
      conn.id,
      msg.to_external_id,
      deps.config.PLATFORM_RATE_BUDGETS,
    );
    if (wait === 0 || wait > PACE_SLEEP_MAX_MS) return wait;
    await sleep(wait);
  }
}

/** Sleeps until a reserved slot, then paces the send as the per-message path does; false when behind a platform's hold. */
async function paceUntil(deps: Deps, conn: Connection, msg: MessageRow, at: number): Promise<boolean> {
  if (at > Date.now()) await sleep(at - Date.now());
  return (await pace(deps, conn, msg)) === 0;
}

/**
 * One recipient's claimed messages of a batch, one call at a time in sequence order. A
 * failure stops the recipient's run: the failed message is retried or failed for good, and
 * the ones behind it are released unsent to their own jobs, which wait for it.
 */
async function sendInOrder(ctx: SendContext, admitted: Admitted[], claim: string, replyTo: string | undefined): Promise<number> {
  const { deps } = ctx;
  const msgs = admitted.map((a) => a.msg);
  let sent = 0;
  for (let i = 0; i < msgs.length; i++) {
    const { msg, conn, paced, at, parties } = admitted[i];
    if (!paced && !(await paceUntil(deps, conn, msg, at))) {
      // Behind a platform's hold: give this one and the rest back to their own jobs, unsent.
      await releaseClaims(deps, msgs.slice(i), claim);
      await handOver(deps, msgs.slice(i), replyTo);
      break;
    }
    const outcome = await callPlatform(deps, conn, textOnly(msg));
    if (outcome.ok) {
      // Recorded before the next call: the ledger then lists the recipient's messages in the
      // order the platform got them.
      await untilAvailable(() => ctx.settleSent({ msg, conn, externalMessageId: outcome.externalMessageId, claim, replyTo, parties }));
      sent++;
      continue;
    }
    const rest = msgs.slice(i + 1);
    await releaseClaims(deps, rest, claim);
    const error = outcome.error;
    await noteFailure(deps, conn, error);
    const stored = storedError(error);
    // `attempts` already counts this call (the batch's claim did).
    if (!error.retryable || msg.attempts >= SEND_ATTEMPTS) await failFinal(ctx, msg, conn, stored, replyTo);
    else {
      await markRetrying(deps, msg, stored);
      if (error.retryAfterMs !== undefined) await holdFor(deps, conn, error.retryAfterMs);
      await handOver(deps, [msg], replyTo, error.retryAfterMs ?? FIRST_RETRY_MS);
    }
    if (rest.length) await handOver(deps, rest, replyTo);
    break;
  }
  return sent;
}

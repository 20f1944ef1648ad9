import { successesOf, type Connection } from '../connections/connections.js';
import { participantsOfInserted } from '../conversations/participants.js';
import { typed } from '../db.js';
import type { Deps } from '../deps.js';
import { addSendReports, reportChannels, type SendOutcome } from '../ledger/commit-reports.js';
import { scheduleDeliveries } from '../inbound/scheduled-deliveries.js';
import { createGroupCommit } from '../ledger/group-commit.js';
import { addWakes, wakeChannels } from '../ledger/wake.js';
import { type Outgoing, publishAll } from '../pubsub.js';
import { writeGuardedEvents, type CommittedEvent } from '../ledger/write.js';
import type { Redis } from '../redis.js';
import { fanOutCommitted, type FanOutServices } from '../webhooks/fan-out.js';
import { outboundEvent, promoteSuccessors } from './delivery.js';
import type { MessageRow } from './messages.js';
import type { PartyResolver, SendParties } from './parties.js';

/** A send the platform accepted, to be recorded as sent by the claim's holder. */
export interface AcceptedSend {
  msg: MessageRow;
  conn: Connection;
  externalMessageId: string;
  /** The claim the platform call was made under. */
  claim: string;
  /** The web process waiting for the outcome. */
  replyTo?: string;
  /** Its parties, resolved while the platform call was under way (resolvePartiesAhead; undefined: resolved here). */
  parties?: Promise<SendParties | undefined>;
}

/** Records an accepted send; resolves true when this call recorded it (false: its claim had lapsed and it was settled otherwise). */
export type SettleSent = (send: AcceptedSend) => Promise<boolean>;

/** What one group commit answers each of its callers. */
interface Flushed {
  settled: Set<string>;
  /** Applications whose statement failed: their sends recorded nothing. */
  failed: Map<string, unknown>;
  bookkeeping: Promise<void>;
}

/** Most sends one group commit carries. */
const SETTLE_BATCH_MAX = 500;
/** A busy connection's health row is touched at most this often by successes. */
const HEALTH_EVERY_MS = 1000;

/**
 * Records accepted sends, many per statement (a group commit, one at a time per process): one
 * statement per application makes each message `sent` — only under the claim its call was made
 * with — and writes its `message.outbound` event through the ledger's guarded write (same head
 * lock, same order), so neither ever exists without the other; the conversation's participants
 * and the connections' health commit with them, in the same round trip. After the commit, one
 * Redis round trip carries the readers' wakes and the waiting web processes' reports; the
 * webhook fan-out and the recipients' next messages follow.
 * A failure before the commit records nothing (its callers retry); after it, a repeat finds the
 * message sent and re-drives what follows through the ledger.
 */
export function createSentSettler(deps: Deps, services: FanOutServices, parties: PartyResolver, redis: Redis = deps.redis): SettleSent {
  const healthAt = new Map<string, number>();
  const settle = createGroupCommit<AcceptedSend, Flushed>(async (sends) => {
    const resolved = await resolveParties(parties, sends);
    const now = Date.now();
    const healthy = new Set(sends.map((s) => s.conn.id).filter((id) => (healthAt.get(id) ?? 0) + HEALTH_EVERY_MS <= now));
    const byApp = new Map<string, number[]>();
    for (const [i, s] of sends.entries()) {
      const group = byApp.get(s.msg.app_id);
      if (group) group.push(i);
      else byApp.set(s.msg.app_id, [i]);
    }
    // One statement per application, each atomic on its own: one that fails fails only its
    // application's sends (their callers retry), and the others' commits are followed through.
    const outcomes = await Promise.allSettled(
      [...byApp].map(([appId, at]) => {
        const mine = at.map((i) => sends[i]);
        const rows = JSON.stringify(mine.map((s) => ({ id: s.msg.id, x: s.externalMessageId, claim: s.claim })));
        const ids = typed.uuids(
          deps.sql,
          mine.map((s) => s.msg.id),
        );
        const guard = deps.sql`
          UPDATE outbound_messages m
             SET status = 'sent', external_message_id = r.x, error = NULL, finished_at = now(), claimed_by = NULL, lease_until = NULL
            FROM jsonb_to_recordset(${typed.text(deps.sql, rows)}::jsonb) AS r(id uuid, x text, claim uuid)
           WHERE m.app_id = ${typed.uuid(deps.sql, appId)} AND m.id = r.id AND m.id = ANY(${ids}) AND m.status = 'sending' AND m.claimed_by = r.claim
          RETURNING m.id`;
        const seen = at.flatMap((i) =>
          [resolved[i].recipient, resolved[i].system].map((u) => ({
            event_id: sends[i].msg.id,
            conversation_id: resolved[i].conversationId,
            platform_user_id: u.id,
          })),
        );
        const conns = [...new Set(mine.map((s) => s.conn.id))].filter((id) => healthy.has(id));
        const extra = conns.length
          ? deps.sql`${participantsOfInserted(deps.sql, appId, seen)}, ${successesOf(deps.sql, appId, conns)}`
          : participantsOfInserted(deps.sql, appId, seen);
        const events = at.map((i) => outboundEvent(sends[i].msg, sends[i].conn, sends[i].externalMessageId, resolved[i]));
        return writeGuardedEvents(deps.sql, appId, events, guard, extra);
      }),
    );
    const failed = new Map<string, unknown>();
    const committed: CommittedEvent[] = [];
    for (const [k, appId] of [...byApp.keys()].entries()) {
      const o = outcomes[k];
      if (o.status === 'fulfilled') committed.push(...o.value);
      else failed.set(appId, o.reason);
    }
    const settled = new Set(committed.map((c) => c.id));

    const recorded = sends.filter((s) => settled.has(s.msg.id));
    const out: Outgoing[] = [];
    addWakes(out, wakeChannels(deps.config), committed);
    addSendReports(
      out,
      reportChannels(deps.config),
      recorded.map((s) => ({
        replyTo: s.replyTo,
        appId: s.msg.app_id,
        id: s.msg.id,
        outcome: { status: 'sent', external_message_id: s.externalMessageId } satisfies SendOutcome,
      })),
    );
    for (const id of healthy) healthAt.set(id, now);
    if (healthAt.size > 10_000) healthAt.clear();
    // Readers and waiting web processes hear at once, and deliveries fan out in commit order
    // (inside the serial section); waking the recipients' next messages needs no order, so the
    // next group commit need not wait for it — each caller still does.
    const bookkeeping = Promise.all([
      promoteSuccessors(
        deps,
        recorded.map((s) => s.msg),
      ),
      scheduleDeliveries(
        deps,
        recorded.map((s) => ({ conn: s.conn, externalMessageId: s.externalMessageId, to: s.msg.to_external_id })),
      ),
    ]).then(() => undefined);
    bookkeeping.catch(() => undefined); // awaited by every caller below
    await Promise.all([publishAll(redis, wakeChannels(deps.config), out), fanOutCommitted(deps, services, committed)]);
    return { settled, failed, bookkeeping };
  }, SETTLE_BATCH_MAX);
  return async (send) => {
    const { settled, failed, bookkeeping } = await settle(send);
    if (failed.has(send.msg.app_id)) throw failed.get(send.msg.app_id);
    await bookkeeping;
    return settled.has(send.msg.id);
  };
}

/**
 * Starts resolving the sends' parties now, in one batch, to run beside their platform calls:
 * one promise per send, undefined if the lookup failed (the settle then resolves it again), so
 * a send whose call fails leaves no rejection behind.
 */
export function resolvePartiesAhead(
  parties: PartyResolver,
  sends: { msg: MessageRow; conn: Connection }[],
): Promise<SendParties | undefined>[] {
  if (sends.length === 0) return [];
  const resolving = parties.resolve(sends);
  return sends.map((_, i) =>
    resolving.then(
      (r) => r[i],
      () => undefined,
    ),
  );
}

/** The sends' parties: those resolved beside their platform calls, the rest in one batch. */
async function resolveParties(parties: PartyResolver, sends: AcceptedSend[]): Promise<SendParties[]> {
  const early = await Promise.all(sends.map((s) => s.parties));
  const missing = sends.filter((_, i) => !early[i]);
  const fetched = missing.length ? await parties.resolve(missing) : [];
  const of = new Map(missing.map((s, i) => [s, fetched[i]]));
  return sends.map((s, i) => early[i] ?? of.get(s)!);
}

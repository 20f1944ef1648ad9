import { recordSuccesses, type Connection } from '../connections/connections.js';
import { addParticipants } from '../conversations/participants.js';
import { transaction } from '../db.js';
import type { Deps } from '../deps.js';
import { addSendReports, type SendOutcome } from '../ledger/commit-reports.js';
import { createGroupCommit } from '../ledger/group-commit.js';
import { addWakes } from '../ledger/wake.js';
import { writeEventsIn } from '../ledger/write.js';
import type { Redis } from '../redis.js';
import { fanOutCommitted, type FanOutServices } from '../webhooks/fan-out.js';
import { outboundEvent, promoteSuccessors } from './delivery.js';
import type { MessageRow } from './messages.js';
import type { PartyResolver } from './parties.js';

/** A send the platform accepted, to be recorded as sent by the claim's holder. */
export interface AcceptedSend {
  msg: MessageRow;
  conn: Connection;
  externalMessageId: string;
  /** The claim the platform call was made under. */
  claim: string;
  /** The web process waiting for the outcome. */
  replyTo?: string;
}

/** Records an accepted send; resolves true when this call recorded it (false: its claim had lapsed and it was settled otherwise). */
export type SettleSent = (send: AcceptedSend) => Promise<boolean>;

/** Most sends one settling transaction carries. */
const SETTLE_BATCH_MAX = 500;
/** A busy connection's health row is touched at most this often by successes. */
const HEALTH_EVERY_MS = 1000;

/**
 * Records accepted sends, many per transaction (a group commit, one at a time per process): in
 * one transaction each message becomes `sent` — only under the claim its call was made with —
 * and its `message.outbound` event is written by the ledger's own writer (same head locks, same
 * order), so neither ever exists without the other; the connections' health rides along. After
 * the commit, one Redis round trip carries the readers' wakes and the waiting web processes'
 * reports; the webhook fan-out, the conversations' participants and the recipients' next
 * messages follow.
 * A failure before the commit records nothing (its callers retry); after it, a repeat finds the
 * message sent and re-drives what follows through the ledger.
 */
export function createSentSettler(deps: Deps, services: FanOutServices, parties: PartyResolver, redis: Redis = deps.redis): SettleSent {
  const healthAt = new Map<string, number>();
  const settle = createGroupCommit<AcceptedSend, { settled: Set<string>; bookkeeping: Promise<void> }>(async (sends) => {
    const resolved = await parties.resolve(sends);
    const now = Date.now();
    const healthy = [...new Set(sends.map((s) => s.conn.id))].filter((id) => (healthAt.get(id) ?? 0) + HEALTH_EVERY_MS <= now);
    const events = sends.map((s, i) => outboundEvent(s.msg, s.conn, s.externalMessageId, resolved[i]));
    const rows = JSON.stringify(sends.map((s) => ({ id: s.msg.id, x: s.externalMessageId, claim: s.claim })));
    const { settled, committed } = await transaction(deps.sql, async (tx) => {
      // The messages' rows first, the ledger heads last: the heads' locks are held until commit.
      const updating = tx<{ id: string }[]>`
        UPDATE outbound_messages m
           SET status = 'sent', external_message_id = r.x, error = NULL, finished_at = now(), claimed_by = NULL, lease_until = NULL
          FROM jsonb_to_recordset(${rows}::text::jsonb) AS r(id uuid, x text, claim uuid)
         WHERE m.id = r.id AND m.status = 'sending' AND m.claimed_by = r.claim
        RETURNING m.id`;
      updating.catch(() => {});
      // Pipelined behind the messages' UPDATE, before the heads are locked: the connections'
      // health costs neither a round trip nor a commit of its own.
      const health = recordSuccesses(tx, healthy);
      health.catch(() => {});
      const updated = await updating;
      await health;
      const ids = new Set(updated.map((u) => u.id));
      return {
        settled: ids,
        committed: await writeEventsIn(
          tx,
          events.filter((e) => ids.has(e.id)),
        ),
      };
    });

    const recorded = sends.filter((s) => settled.has(s.msg.id));
    const pipeline = redis.pipeline();
    addWakes(pipeline, deps.config.REDIS_PREFIX, committed);
    addSendReports(
      pipeline,
      deps.config.REDIS_PREFIX,
      recorded.map((s) => ({
        replyTo: s.replyTo,
        appId: s.msg.app_id,
        id: s.msg.id,
        outcome: { status: 'sent', external_message_id: s.externalMessageId } satisfies SendOutcome,
      })),
    );
    const at = new Map(committed.map((c) => [c.id, c.created_at]));
    for (const id of healthy) healthAt.set(id, now);
    if (healthAt.size > 10_000) healthAt.clear();
    // Readers and waiting web processes hear at once, and deliveries fan out in commit order
    // (inside the serial section); the bookkeeping below needs no order, so the next group
    // commit need not wait for it — each caller still does.
    const bookkeeping = Promise.all([
      addParticipants(
        deps.sql,
        sends.flatMap((s, i) => {
          const created = at.get(s.msg.id);
          if (!created) return [];
          const p = resolved[i];
          return [p.recipient, p.system].map((u) => ({
            conversation_id: p.conversationId,
            platform_user_id: u.id,
            app_id: s.msg.app_id,
            at: created,
          }));
        }),
      ),
      promoteSuccessors(
        deps,
        recorded.map((s) => s.msg),
      ),
    ]).then(() => undefined);
    bookkeeping.catch(() => undefined); // awaited by every caller below
    await Promise.all([pipeline.exec(), fanOutCommitted(deps, services, committed)]);
    return { settled, bookkeeping };
  }, SETTLE_BATCH_MAX);
  return async (send) => {
    const { settled, bookkeeping } = await settle(send);
    await bookkeeping;
    return settled.has(send.msg.id);
  };
}

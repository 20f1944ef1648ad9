import type { Deps } from '../deps.js';
import { derivedId } from '../ids.js';
import type { CommittedEvent } from '../ledger/write.js';
import { buildDeliveryBody, type BodyEvent } from './body.js';
import { enqueueDeliveryRuns, enqueueFirstAttempts, enqueueFirstAttemptsSafetyNet } from './delivery-queue.js';
import type { LocalFirstAttempts } from './local-deliverer.js';
import { holdSafetyNet } from './safety-net.js';
import type { SubscriptionCache } from './subscription-cache.js';

/** A delivery's id is derived from (subscription, event): a repeat computes the same one. */
export const deliveryIdOf = (subscriptionId: string, eventId: string) => derivedId('webhook-delivery', subscriptionId, eventId);

interface NewDelivery {
  id: string;
  app_id: string;
  subscription_id: string;
  event_id: string;
  event_type: string;
  body: string;
}

/**
 * Creates pending deliveries of (subscription, event) pairs and queues a run for each (used by
 * replay, which targets one subscription). The insert joins the subscriptions table, so a
 * subscription paused or deleted meanwhile gets nothing; the unique (subscription, event) key
 * makes a repeat insert nothing, and rows a repeat finds untouched are queued again under the
 * same job id, which BullMQ drops if the first enqueue did land.
 */
export async function createDeliveries(deps: Deps, pairs: { subscriptionId: string; event: BodyEvent }[]): Promise<{ created: number }> {
  if (pairs.length === 0) return { created: 0 };
  const now = new Date();
  const rows: NewDelivery[] = pairs.map(({ subscriptionId, event }) => {
    const id = deliveryIdOf(subscriptionId, event.id);
    return {
      id,
      app_id: event.app_id,
      subscription_id: subscriptionId,
      event_id: event.id,
      event_type: event.event_type,
      body: buildDeliveryBody({ deliveryId: id, subscriptionId, event, timestamp: now }),
    };
  });
  const { sql } = deps;
  const inserted = await sql<{ id: string; app_id: string }[]>`
    INSERT INTO webhook_deliveries (id, app_id, subscription_id, event_id, event_type, body)
    SELECT r.id, r.app_id, r.subscription_id, r.event_id, r.event_type, r.body
      FROM jsonb_to_recordset(${sql.json(rows as never)}::jsonb) AS r(id uuid, app_id uuid, subscription_id uuid, event_id uuid, event_type text, body text)
      JOIN webhook_subscriptions s ON s.id = r.subscription_id AND s.app_id = r.app_id AND s.status = 'ACTIVE'
    ON CONFLICT (app_id, subscription_id, event_id) DO NOTHING
    RETURNING id, app_id`;
  const runs = inserted.map((r) => ({ id: r.id, app_id: r.app_id, run: 0 }));
  if (inserted.length < rows.length) {
    const got = new Set(inserted.map((r) => r.id));
    const others = rows.filter((r) => !got.has(r.id));
    const untouched = await sql<{ id: string; app_id: string; run: number }[]>`
      SELECT d.id, d.app_id, d.run FROM webhook_deliveries d
        JOIN unnest(${others.map((r) => r.app_id)}::uuid[], ${others.map((r) => r.id)}::uuid[]) AS o(app_id, id) ON d.app_id = o.app_id AND d.id = o.id
       WHERE d.id = ANY(${others.map((r) => r.id)}::uuid[]) AND d.status = 'pending' AND d.attempt_count = 0`;
    runs.push(...untouched);
  }
  await enqueueDeliveryRuns(deps, runs);
  return { created: inserted.length };
}

/** What the fan-out matches with, and hands first attempts to when the webhook worker runs in its process. */
export interface FanOutServices {
  subscriptions: SubscriptionCache;
  localFirstAttempts: LocalFirstAttempts | undefined;
}

/**
 * The ledger's after-commit hook, for events an active subscription matches (matching uses
 * the per-process subscription cache, so it costs no query). When the webhook worker runs in
 * this process, first attempts start right here, without a queue round trip, and one job for
 * the batch's events is queued delayed past WEBHOOK_TIMEOUT_MS as a safety net, held as a
 * lease (safety-net.ts): should this process die first, the job makes them. Events the
 * process cannot take now get a job each (id: the event id) that runs at once. A replayed
 * ledger job sends nothing twice: job ids derive from the events, and a first attempt is
 * never made for a (subscription, event) that already has a delivery.
 */
export async function fanOutCommitted(deps: Deps, webhooks: FanOutServices, committed: CommittedEvent[]): Promise<void> {
  if (committed.length === 0) return;
  const byApp = await webhooks.subscriptions.forApps([...new Set(committed.map((e) => e.app_id))]);
  const matched = committed
    .filter((e) => (byApp.get(e.app_id) ?? []).some((s) => s.status === 'ACTIVE' && s.matches(e)))
    .map((e) => ({ event_id: e.id, app_id: e.app_id, ...(e.trace ? { trace: e.trace } : {}) }));
  if (matched.length === 0) return;
  const local = webhooks.localFirstAttempts?.take(matched);
  const taken = local?.taken ?? [];
  const takenIds = new Set(taken.map((e) => e.event_id));
  const delayMs = deps.config.WEBHOOK_TIMEOUT_MS + SAFETY_NET_MARGIN_MS;
  const [net] = await Promise.all([
    enqueueFirstAttemptsSafetyNet(deps, taken, delayMs),
    enqueueFirstAttempts(
      deps,
      matched.filter((e) => !takenIds.has(e.event_id)),
    ),
  ]);
  if (net && local) holdSafetyNet(deps, net, local.done, delayMs);
}

/** How long past the attempt timeout the safety-net job waits (outcome writes take a moment). */
export const SAFETY_NET_MARGIN_MS = 10_000;

import { z } from 'zod';
import type { Deps } from '../deps.js';
import { fail, ok, type Result } from '../errors.js';
import { decodeCursor } from '../ledger/cursor.js';
import { encodeCursor } from '../ledger/cursor.js';
import { loadBodyEvents } from './body.js';
import { enqueueDeliveryRuns } from './delivery-queue.js';
import { createDeliveries, deliveryIdOf } from './fan-out.js';
import { isUuid, loadSubscriptionForSend } from './subscriptions.js';

export const replayInput = z.strictObject({
  /** An ISO 8601 time (events created after it) or an event cursor (events after it). */
  since: z.string().min(1).max(300),
});

export interface ReplayResult {
  /** Deliveries queued by this request (new ones and re-sends of finished ones). */
  queued: number;
  /** Matching events whose delivery was still pending or retrying: not queued twice. */
  already_queued: number;
  /** Events looked at. */
  scanned: number;
  /** More events lie beyond the bound; replay again from next_since. */
  truncated: boolean;
  next_since?: string;
}

const PAGE = 1000;

/**
 * Re-queues the subscription's deliveries for every matching event after `since`. Bounded by
 * WEBHOOK_REPLAY_MAX scanned events (the answer says where to continue), and deduplicated: an
 * event whose delivery is still pending or retrying is not queued again; a finished one is
 * re-sent with its original body under a new run.
 */
export async function replaySubscription(deps: Deps, appId: string, subscriptionId: string, since: string): Promise<Result<ReplayResult>> {
  const sub = await loadSubscriptionForSend(deps, appId, subscriptionId);
  if (!sub) return fail('NOT_FOUND', `No webhook subscription ${subscriptionId}`);
  if (sub.status !== 'ACTIVE') return fail('CONFLICT', `Subscription is ${sub.status}; set it ACTIVE before replaying`);
  const { sql } = deps;

  let afterSeq: number;
  const cursor = decodeCursor(since);
  if (cursor.ok) afterSeq = cursor.value.seq;
  else {
    const t = Date.parse(since);
    if (Number.isNaN(t) || !/^\d{4}-\d\d-\d\d/.test(since)) {
      return fail('VALIDATION_ERROR', 'since must be an ISO 8601 time or an event cursor', [
        { path: ['since'], message: 'not a time or cursor' },
      ]);
    }
    const [first] = await sql<{ seq: number }[]>`
      SELECT seq FROM events WHERE app_id = ${appId} AND created_at > ${new Date(t)} ORDER BY created_at, seq LIMIT 1`;
    afterSeq = first ? first.seq - 1 : Number.MAX_SAFE_INTEGER;
  }

  // The subscription's own matcher: a subscription made in a scoped session replays nothing outside its scope.
  const { matches } = sub;
  const max = deps.config.WEBHOOK_REPLAY_MAX;
  const matched: { id: string; seq: number }[] = [];
  let scanned = 0;
  let last: { seq: number; id: string; created_at: string } | undefined;
  let truncated = false;
  while (scanned < max) {
    const take = Math.min(PAGE, max - scanned);
    const rows = await sql<
      { id: string; seq: number; event_type: string; event_alias: string | null; channels: string[]; created_at: string }[]
    >`
      SELECT id, seq, event_type, event_alias, channels, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at
        FROM events WHERE app_id = ${appId} AND seq > ${last?.seq ?? afterSeq}
       ORDER BY seq LIMIT ${take}`;
    for (const r of rows) if (matches(r)) matched.push(r);
    scanned += rows.length;
    if (rows.length) last = rows.at(-1);
    if (rows.length < take) break;
  }
  if (scanned >= max && last) {
    const [more] = await sql`SELECT 1 FROM events WHERE app_id = ${appId} AND seq > ${last.seq} LIMIT 1`;
    truncated = Boolean(more);
  }

  let queued = 0;
  let alreadyQueued = 0;
  for (let i = 0; i < matched.length; i += PAGE) {
    const chunk = matched.slice(i, i + PAGE);
    const ids = chunk.map((e) => deliveryIdOf(sub.id, e.id));
    // Finished deliveries start a new run with their stored body; live ones are left alone.
    const rerun = await sql<{ id: string; app_id: string; run: number }[]>`
      UPDATE webhook_deliveries SET status = 'pending', run = run + 1, updated_at = now()
       WHERE app_id = ${appId} AND subscription_id = ${sub.id} AND id = ANY(${ids}::uuid[]) AND status IN ('delivered', 'failed')
       RETURNING id, app_id, run`;
    await enqueueDeliveryRuns(deps, rerun);
    const existing = await sql<{ id: string }[]>`SELECT id FROM webhook_deliveries WHERE app_id = ${appId} AND id = ANY(${ids}::uuid[])`;
    const have = new Set(existing.map((r) => r.id));
    const fresh = chunk.filter((e) => !have.has(deliveryIdOf(sub.id, e.id)));
    const events = await loadBodyEvents(
      sql,
      fresh.map((e) => ({ app_id: appId, id: e.id })),
    );
    const created = await createDeliveries(
      deps,
      [...events.values()].map((event) => ({ subscriptionId: sub.id, event })),
    );
    queued += rerun.length + created.created;
    alreadyQueued += chunk.length - rerun.length - fresh.length;
  }
  return ok({
    queued,
    already_queued: alreadyQueued,
    scanned,
    truncated,
    ...(truncated && last ? { next_since: encodeCursor({ seq: last.seq, createdAt: last.created_at, id: last.id }) } : {}),
  });
}

/** Re-sends a failed delivery now: a new run with the full retry schedule and the stored body. */
export async function retryDelivery(
  deps: Deps,
  appId: string,
  deliveryId: string,
): Promise<Result<{ id: string; status: 'pending'; run: number }>> {
  if (!isUuid(deliveryId)) return fail('NOT_FOUND', `No webhook delivery ${deliveryId}`);
  const [row] = await deps.sql<{ status: string; sub_status: string }[]>`
    SELECT d.status, s.status AS sub_status FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
     WHERE d.app_id = ${appId} AND d.id = ${deliveryId}`;
  if (!row) return fail('NOT_FOUND', `No webhook delivery ${deliveryId}`);
  if (row.sub_status !== 'ACTIVE') return fail('CONFLICT', `Subscription is ${row.sub_status}; set it ACTIVE before retrying`);
  const [updated] = await deps.sql<{ id: string; app_id: string; run: number }[]>`
    UPDATE webhook_deliveries SET status = 'pending', run = run + 1, updated_at = now()
     WHERE app_id = ${appId} AND id = ${deliveryId} AND status = 'failed'
     RETURNING id, app_id, run`;
  if (!updated) return fail('CONFLICT', `Only a failed delivery can be retried; this one is ${row.status}`);
  await enqueueDeliveryRuns(deps, [updated]);
  return ok({ id: updated.id, status: 'pending', run: updated.run });
}

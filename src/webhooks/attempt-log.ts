import { transaction } from '../db.js';
import type { Deps } from '../deps.js';
import { derivedId } from '../ids.js';
import { systemEvent, systemEventType } from '../ledger/event-types.js';
import { createGroupCommit } from '../ledger/group-commit.js';
import { byApp } from '../per-app.js';
import { enqueue } from '../queues.js';
import { deleteInBatches } from '../retention/batched-delete.js';
import { storableText } from '../storable-text.js';
import { capBody } from './http-client.js';
import { publishSubscriptionsChanged } from './subscription-cache.js';

export type DeliveryStatus = 'pending' | 'retrying' | 'delivered' | 'failed';

/** One attempt's outcome: a log row, the delivery's new state, and its effect on endpoint health. */
export interface AttemptRecord {
  deliveryId: string | null;
  appId: string;
  subscriptionId: string;
  eventId: string;
  eventType: string;
  status: DeliveryStatus;
  attempt: number;
  statusCode: number | null;
  durationMs: number;
  error: string | null;
  /** Null for a delivery's attempts: they send the delivery's stored body, read from there. */
  requestBody: string | null;
  responseBody: string | null;
  /** The headers sent, and the receiver's answer's; null when nothing was sent, or nothing answered. */
  requestHeaders?: Record<string, string> | null;
  responseHeaders?: Record<string, string | string[] | undefined> | null;
  /** When the next attempt is due (status `retrying`). */
  nextRetryAt?: Date | null;
  /** Unix seconds of the delivery's first attempt. */
  firstAttemptTs: number | null;
  /** Whether this outcome moves the consecutive-failure count (test sends and skips do not). */
  affectsHealth: boolean;
  /** Set when the delivery row does not exist yet (an event's first attempt): it is inserted with this outcome. */
  newDelivery?: { body: string };
  /** Whether the record is an attempt to log. @default true */
  log?: boolean;
}

/**
 * Receivers' answers and transport errors are text from outside, already received: stored
 * with U+0000 and lone surrogates replaced (PostgreSQL refuses them), so a receiver's odd body
 * cannot fail its delivery's log write on every attempt.
 */
const cap = (s: string | null) => (s === null ? null : storableText(capBody(s)));

/** Group commits running side by side; a subscription's records always go to the same one. */
const SHARDS = 4;

/**
 * Records attempt outcomes, many per transaction: concurrent deliveries share one commit
 * (group commit) instead of three writes each. Each caller resolves once its record is durable.
 * Several commits run at once, split by subscription: a busy moment's records are not queued
 * behind one transaction, and two transactions of this process never touch the same
 * subscription's rows (its health counter, its deliveries), so they do not wait on each other.
 */
export function createAttemptLog(deps: Deps): { record(r: AttemptRecord): Promise<void> } {
  const shards = Array.from({ length: SHARDS }, () =>
    createGroupCommit<AttemptRecord, void>((records) => writeAttempts(deps, records), 500),
  );
  // Subscription ids are random UUIDs: their leading bits spread them evenly.
  return { record: (r) => shards[parseInt(r.subscriptionId.slice(0, 8), 16) % SHARDS](r) };
}

async function writeAttempts(deps: Deps, records: AttemptRecord[]): Promise<void> {
  const { sql } = deps;
  const logs = records
    .filter((r) => r.log !== false)
    .map((r) => ({
      app_id: r.appId,
      subscription_id: r.subscriptionId,
      delivery_id: r.deliveryId,
      event_id: r.eventId,
      event_type: r.eventType,
      status: r.status,
      status_code: r.statusCode,
      attempt_count: r.attempt,
      duration_ms: r.durationMs,
      error_message: cap(r.error),
      request_body: cap(r.requestBody),
      response_body: cap(r.responseBody),
      request_headers: r.requestHeaders ?? null,
      response_headers: r.responseHeaders ? storableText(r.responseHeaders) : null,
      next_retry_at: r.nextRetryAt?.toISOString() ?? null,
    }));
  const outcome = (r: AttemptRecord) => ({
    id: r.deliveryId,
    app_id: r.appId,
    status: r.status,
    attempt: r.attempt,
    status_code: r.statusCode,
    error: cap(r.error),
    first_ts: r.firstAttemptTs,
  });
  const inserts = records
    .filter((r) => r.newDelivery && r.deliveryId)
    .map((r) => ({
      ...outcome(r),
      subscription_id: r.subscriptionId,
      event_id: r.eventId,
      event_type: r.eventType,
      body: r.newDelivery!.body,
    }));
  const deliveries = records.filter((r) => r.deliveryId !== null && !r.newDelivery).map(outcome);

  // Per subscription, the batch's net effect on its failure run: a delivered one resets it.
  const health = new Map<string, { app_id: string; reset: boolean; n: number }>();
  for (const r of records) {
    if (!r.affectsHealth || (r.status !== 'delivered' && r.status !== 'failed')) continue;
    const h = health.get(r.subscriptionId) ?? { app_id: r.appId, reset: false, n: 0 };
    if (r.status === 'delivered') Object.assign(h, { reset: true, n: 0 });
    else h.n++;
    health.set(r.subscriptionId, h);
  }
  const healthRows = [...health].map(([id, h]) => ({ id, ...h }));

  type Disabled = { id: string; app_id: string; name: string; target_url: string; consecutive_failures: number; disabled_at: Date };
  // A lost session is written again once: otherwise the attempt, already made, is repeated.
  const disabled: Disabled[] = await transaction(
    sql,
    async (tx) => {
      if (inserts.length) {
        // Joined with the subscription so one deleted meanwhile is skipped rather than failing the batch.
        await tx`
        INSERT INTO webhook_deliveries (id, app_id, subscription_id, event_id, event_type, body, status, attempt_count,
                                        first_attempt_ts, last_status_code, last_error)
        SELECT r.id, r.app_id, r.subscription_id, r.event_id, r.event_type, r.body, r.status, r.attempt,
               r.first_ts, r.status_code, r.error
          FROM jsonb_to_recordset(${tx.json(inserts as never)}::jsonb) AS r(id uuid, app_id uuid, subscription_id uuid, event_id uuid,
               event_type text, body text, status text, attempt int, first_ts bigint, status_code int, error text)
          JOIN webhook_subscriptions s ON s.id = r.subscription_id AND s.app_id = r.app_id
        ON CONFLICT (app_id, subscription_id, event_id) DO NOTHING`;
      }
      await Promise.all(
        byApp(deliveries).map(
          ([appId, mine]) => tx`
        UPDATE webhook_deliveries d SET
          status = r.status, attempt_count = GREATEST(d.attempt_count, r.attempt), last_status_code = r.status_code,
          last_error = r.error, first_attempt_ts = COALESCE(d.first_attempt_ts, r.first_ts), updated_at = now()
          FROM jsonb_to_recordset(${tx.json(mine as never)}::jsonb) AS r(id uuid, app_id uuid, status text, attempt int, status_code int, error text, first_ts bigint)
         WHERE d.app_id = ${appId} AND d.id = r.id AND d.id = ANY(${mine.map((x) => x.id)}::uuid[])`,
        ),
      );
      if (logs.length)
        await tx`
      INSERT INTO webhook_delivery_logs (app_id, subscription_id, delivery_id, event_id, event_type, status, status_code,
                                         attempt_count, duration_ms, error_message, request_body, response_body,
                                         request_headers, response_headers, next_retry_at)
      SELECT r.app_id, r.subscription_id, r.delivery_id, r.event_id, r.event_type, r.status, r.status_code,
             r.attempt_count, r.duration_ms, r.error_message, r.request_body, r.response_body,
             r.request_headers, r.response_headers, r.next_retry_at
        FROM jsonb_to_recordset(${tx.json(logs as never)}::jsonb) AS r(app_id uuid, subscription_id uuid, delivery_id uuid, event_id uuid,
             event_type text, status text, status_code int, attempt_count int, duration_ms int, error_message text,
             request_body text, response_body text, request_headers jsonb, response_headers jsonb, next_retry_at timestamptz)
        -- A subscription deleted meanwhile takes its log with it.
       WHERE EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.id = r.subscription_id AND s.app_id = r.app_id)`;
      if (healthRows.length === 0) return [] as Disabled[];
      // Healthy endpoints that stay healthy are not rewritten (no row churn on the hot path).
      const healthByApp = byApp(healthRows);
      await Promise.all(
        healthByApp.map(
          ([appId, mine]) => tx`
      UPDATE webhook_subscriptions s SET
        consecutive_failures = CASE WHEN r.reset THEN r.n ELSE s.consecutive_failures + r.n END
        FROM jsonb_to_recordset(${tx.json(mine as never)}::jsonb) AS r(id uuid, app_id uuid, reset boolean, n int)
       WHERE s.app_id = ${appId} AND s.id = r.id AND NOT (r.reset AND s.consecutive_failures = r.n)`,
        ),
      );
      // Only a failure can push a subscription over the limit.
      const failing = healthByApp.filter(([, mine]) => mine.some((h) => h.n > 0));
      const disabledPerApp = await Promise.all(
        failing.map(
          ([appId, mine]) => tx<Disabled[]>`
      UPDATE webhook_subscriptions SET status = 'DISABLED', disabled_at = now(), updated_at = now()
       WHERE app_id = ${appId} AND id = ANY(${mine.map((h) => h.id)}::uuid[]) AND status = 'ACTIVE'
         AND consecutive_failures >= ${deps.config.WEBHOOK_DISABLE_AFTER}
       RETURNING id, app_id, name, target_url, consecutive_failures, disabled_at`,
        ),
      );
      return disabledPerApp.flat();
    },
    { againIfLost: 1 },
  );

  for (const s of disabled) {
    deps.logger.warn(
      { subscriptionId: s.id, appId: s.app_id, failures: s.consecutive_failures },
      'webhook subscription disabled after consecutive failed deliveries',
    );
    await publishSubscriptionsChanged(deps, s.app_id);
    const at = s.disabled_at.toISOString();
    await enqueue(deps.queues, 'ledger', {
      event: {
        id: derivedId(systemEventType('system.webhook_disabled'), s.id, at),
        app_id: s.app_id,
        ...systemEvent('system.webhook_disabled', {
          subscription_id: s.id,
          name: s.name,
          target_url: s.target_url,
          consecutive_failures: s.consecutive_failures,
          disabled_at: at,
        }),
        edges: [],
        attachments: [],
      },
    });
  }
}

/** Deletes log rows (and finished deliveries) older than WEBHOOK_LOG_RETENTION_DAYS, in bounded chunks. */
export async function purgeOldLogs(deps: Deps): Promise<{ logs: number; deliveries: number }> {
  const days = deps.config.WEBHOOK_LOG_RETENTION_DAYS;
  const logs = await deleteInBatches(
    async (limit) =>
      (
        await deps.sql`
      DELETE FROM webhook_delivery_logs WHERE (app_id, n) IN (
        SELECT app_id, n FROM webhook_delivery_logs WHERE created_at < now() - ${days} * interval '1 day' LIMIT ${limit})`
      ).count,
  );
  const deliveries = await deleteInBatches(
    async (limit) =>
      (
        await deps.sql`
      DELETE FROM webhook_deliveries WHERE (app_id, id) IN (
        SELECT app_id, id FROM webhook_deliveries
         WHERE status IN ('delivered', 'failed') AND updated_at < now() - ${days} * interval '1 day' LIMIT ${limit})`
      ).count,
  );
  return { logs, deliveries };
}

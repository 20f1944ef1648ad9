import type { Deps } from '../deps.js';
import { createAttemptLog, type AttemptRecord, type DeliveryStatus } from './attempt-log.js';
import { createBatchLoader } from './batch-loader.js';
import { createWebhookHttpClient, type WebhookHttpClient } from './http-client.js';
import { parseRetryAfter } from './retry-policy.js';
import { signatureHeaders } from './signing.js';
import { signingSecrets, subscriptionCacheFor } from './subscription-cache.js';
import { takeDeliverySlot } from './throttle.js';

interface DeliveryRow {
  id: string;
  app_id: string;
  subscription_id: string;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  body: string;
  attempt_count: number;
  run: number;
  first_attempt_ts: string | null;
}

/** What one run of a delivery job came to; the worker turns it into BullMQ's terms. */
export type AttemptOutcome =
  | { kind: 'skipped'; reason: string }
  | { kind: 'wait'; ms: number }
  | { kind: 'delivered'; attempt: number; statusCode: number }
  | { kind: 'retry'; attempt: number; error: string; retryAfterMs?: number }
  | { kind: 'failed'; attempt: number; error: string };

export interface Deliverer {
  /**
   * Makes one attempt of a delivery. `lastAttempt` says whether a failure is final (the job
   * has no attempts left). Outcomes are recorded before this resolves.
   */
  attempt(job: { deliveryId: string; appId: string; run: number; lastAttempt: boolean }): Promise<AttemptOutcome>;
  http: WebhookHttpClient;
  close(): Promise<void>;
}

/** Extra headers a receiver sees on a retry (SPEC 5.2 rule 6). */
export function retryHeaders(attempt: number, originalTs: number): Record<string, string> {
  return attempt > 1 ? { 'x-service-retry-count': String(attempt - 1), 'x-service-original-timestamp': String(originalTs) } : {};
}

/**
 * The delivery side of outbound webhooks. Per attempt it reads the delivery row (coalesced
 * with other jobs of the same tick), takes the subscription from the process cache, signs
 * the stored body, POSTs it through a keep-alive pool and records the outcome in a shared
 * group commit: no per-delivery subscription load, no per-delivery transaction.
 */
export function createDeliverer(deps: Deps): Deliverer {
  const cache = subscriptionCacheFor(deps);
  const http = createWebhookHttpClient({ policy: deps.config.WEBHOOK_TARGET_POLICY, timeoutMs: deps.config.WEBHOOK_TIMEOUT_MS });
  const log = createAttemptLog(deps);
  const load = createBatchLoader<string, DeliveryRow>(async (keys) => {
    const pairs = keys.map((k) => k.split('/'));
    const rows = await deps.sql<DeliveryRow[]>`
      SELECT d.id, d.app_id, d.subscription_id, d.event_id, d.event_type, d.status, d.body, d.attempt_count, d.run, d.first_attempt_ts
        FROM unnest(${pairs.map((p) => p[0])}::uuid[], ${pairs.map((p) => p[1])}::uuid[]) AS k(app_id, id)
        JOIN webhook_deliveries d ON d.app_id = k.app_id AND d.id = k.id`;
    return new Map(rows.map((r) => [`${r.app_id}/${r.id}`, r]));
  });

  const record = (d: DeliveryRow, r: Omit<AttemptRecord, 'deliveryId' | 'appId' | 'subscriptionId' | 'eventId' | 'eventType' | 'requestBody'>) =>
    log.record({ deliveryId: d.id, appId: d.app_id, subscriptionId: d.subscription_id, eventId: d.event_id, eventType: d.event_type, requestBody: d.body, ...r });

  return {
    http,
    async attempt({ deliveryId, appId, run, lastAttempt }) {
      const d = await load(`${appId}/${deliveryId}`);
      if (!d) return { kind: 'skipped', reason: 'delivery no longer exists' };
      if (d.run !== run) return { kind: 'skipped', reason: `superseded by run ${d.run}` };
      if (d.status === 'delivered' || d.status === 'failed') return { kind: 'skipped', reason: `already ${d.status}` };
      const sub = await cache.get(appId, d.subscription_id);
      if (!sub) return { kind: 'skipped', reason: 'subscription deleted' };
      if (sub.status !== 'ACTIVE') {
        // Paused or disabled since it was queued: not sent (resuming must not flood), kept as failed for replay.
        const error = `not sent: subscription is ${sub.status}`;
        await record(d, { status: 'failed', attempt: d.attempt_count, statusCode: null, durationMs: 0, error, responseBody: null, firstAttemptTs: null, affectsHealth: false });
        return { kind: 'failed', attempt: d.attempt_count, error };
      }
      if (sub.maxPerSecond) {
        const wait = await takeDeliverySlot(deps.redis, deps.config.REDIS_PREFIX, sub.id, sub.maxPerSecond);
        if (wait > 0) return { kind: 'wait', ms: wait };
      }

      const attempt = d.attempt_count + 1;
      const ts = Math.floor(Date.now() / 1000);
      const originalTs = d.first_attempt_ts !== null ? Number(d.first_attempt_ts) : ts;
      const headers = { ...signatureHeaders({ deliveryId: d.id, timestamp: ts, body: d.body, secrets: signingSecrets(sub) }), ...retryHeaders(attempt, originalTs) };
      const res = await http.post(sub.targetUrl, d.body, headers);
      const delivered = res.error === undefined && res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300;
      const status: DeliveryStatus = delivered ? 'delivered' : lastAttempt ? 'failed' : 'retrying';
      deps.metrics.webhookAttempts.inc({ outcome: status });
      await record(d, {
        status,
        attempt,
        statusCode: res.statusCode ?? null,
        durationMs: res.durationMs,
        error: res.error ?? null,
        responseBody: res.statusCode !== undefined ? res.responseBody : null,
        firstAttemptTs: originalTs,
        affectsHealth: true,
      });
      if (delivered) return { kind: 'delivered', attempt, statusCode: res.statusCode! };
      if (lastAttempt) return { kind: 'failed', attempt, error: res.error ?? 'failed' };
      const retryAfterMs = res.statusCode === 429 || res.statusCode === 503 ? parseRetryAfter(res.headers['retry-after']) : undefined;
      return { kind: 'retry', attempt, error: res.error ?? 'failed', ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
    },
    async close() {
      await http.close();
    },
  };
}

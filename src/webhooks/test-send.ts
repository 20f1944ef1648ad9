import { randomUUID } from 'node:crypto';
import type { Deps } from '../deps.js';
import { fail, ok, type Result } from '../errors.js';
import { systemEvent } from '../ledger/event-types.js';
import { createAttemptLog } from './attempt-log.js';
import { buildDeliveryBody } from './body.js';
import { createWebhookHttpClient } from './http-client.js';
import { createSenders, senderOptions } from '../destinations/senders.js';
import { signatureHeaders } from './signing.js';
import { loadSubscriptionForSend } from './subscriptions.js';

export interface TestSendResult {
  success: boolean;
  status_code: number | null;
  response_body: string | null;
  /** Milliseconds from sending to the complete answer (or the failure). */
  duration: number;
  error_message: string | null;
}

/**
 * Sends a signed `webhook.test` delivery now and reports what the receiver answered. It goes
 * through the same signing, target policy and timeout as real deliveries, is logged, and
 * does not count toward the endpoint's failure run. Allowed in any status, so an operator can
 * check a paused or disabled endpoint before resuming it.
 */
export async function sendTestDelivery(deps: Deps, appId: string, subscriptionId: string): Promise<Result<TestSendResult>> {
  const sub = await loadSubscriptionForSend(deps, appId, subscriptionId);
  if (!sub) return fail('NOT_FOUND', `No webhook subscription ${subscriptionId}`);
  const deliveryId = randomUUID();
  const eventId = randomUUID();
  const now = new Date();
  const test = systemEvent('webhook.test');
  const body = buildDeliveryBody({
    deliveryId,
    subscriptionId: sub.id,
    event: {
      id: eventId,
      app_id: appId,
      ...test,
      edges: {},
      channels: [],
      created_at: now.toISOString(),
      platform_connection_id: null,
    },
    timestamp: now,
  });
  const ts = Math.floor(now.getTime() / 1000);
  const options = { policy: deps.config.OUTBOUND_ADDRESS_POLICY, timeoutMs: deps.config.WEBHOOK_TIMEOUT_MS };
  const http = createWebhookHttpClient({ ...options, connectionsPerOrigin: 1 });
  const senders = createSenders(http, senderOptions(deps.config));
  try {
    const headers = signatureHeaders({ deliveryId, timestamp: ts, body, secrets: sub.secrets });
    const res = await senders.send(sub.destination, { deliveryId, appId, eventType: test.event_type, body, headers });
    const success = res.delivered;
    await createAttemptLog(deps).record({
      deliveryId: null,
      appId,
      subscriptionId: sub.id,
      eventId,
      eventType: test.event_type,
      status: success ? 'delivered' : 'failed',
      attempt: 1,
      statusCode: res.statusCode ?? null,
      durationMs: res.durationMs,
      error: res.error ?? null,
      requestBody: body,
      responseBody: res.statusCode !== undefined ? res.responseBody : null,
      requestHeaders: res.requestHeaders,
      responseHeaders: res.statusCode !== undefined ? res.headers : null,
      firstAttemptTs: ts,
      affectsHealth: false,
    });
    return ok({
      success,
      status_code: res.statusCode ?? null,
      response_body: res.statusCode !== undefined ? res.responseBody : null,
      duration: res.durationMs,
      error_message: res.error ?? null,
    });
  } finally {
    await senders.close();
    await http.close();
  }
}

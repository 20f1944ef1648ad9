import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttemptLog, type AttemptRecord } from '../../src/webhooks/attempt-log.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { eventually, startReceiver, type Receiver } from './receiver.js';

let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;
const receivers: Receiver[] = [];

beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger', 'webhook'], env: { WEBHOOK_RETRY_DELAYS_MS: '0,300,600', WEBHOOK_TIMEOUT_MS: '800' } });
  a = await s.createApp();
  b = await s.createApp();
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await s.close();
});

async function subscribe(auth: AppCredentials, url: string) {
  const r = await s.request('POST', '/v1/webhook-subscriptions', {
    auth,
    body: { name: 'hook', target_url: url, event_patterns: ['order.*'] },
  });
  expect(r.status).toBe(201);
  return r.json.id as string;
}

const logsOf = (subId: string) =>
  s.deps.sql<
    { status: string; response_body: string | null }[]
  >`SELECT status, response_body FROM webhook_delivery_logs WHERE subscription_id = ${subId}`;

describe('the webhook attempt log', () => {
  it('logs a delivery whose receiver answered with U+0000 (which PostgreSQL cannot store), and the deliveries logged beside it', async () => {
    const nul = await startReceiver();
    const fine = await startReceiver();
    receivers.push(nul, fine);
    nul.answer({ status: 200, body: 'ok\u0000then more' });
    const nulSub = await subscribe(a, nul.url);
    const fineSub = await subscribe(b, fine.url);
    await Promise.all([
      s.request('POST', '/v1/events', { auth: a, body: { event_type: 'order.placed', payload: {} } }),
      s.request('POST', '/v1/events', { auth: b, body: { event_type: 'order.placed', payload: {} } }),
    ]);
    const nulLog = await eventually(async () => (await logsOf(nulSub)).find((l) => l.status === 'delivered'), 15_000);
    expect(nulLog.response_body).toBe('ok\uFFFDthen more');
    await eventually(async () => (await logsOf(fineSub)).find((l) => l.status === 'delivered'), 15_000);
    // Delivered once: a log write that failed would have sent it again.
    expect(nul.received).toHaveLength(1);
  });

  it("commits every record of a batch but the one PostgreSQL refuses, which alone fails with the database's error", async () => {
    const rx = await startReceiver();
    receivers.push(rx);
    const subA = await subscribe(a, rx.url);
    const subB = await subscribe(b, rx.url);
    const log = createAttemptLog(s.deps);
    const record = (appId: string, subscriptionId: string, eventType: string): AttemptRecord => ({
      deliveryId: null,
      appId,
      subscriptionId,
      eventId: randomUUID(),
      eventType,
      status: 'delivered',
      attempt: 1,
      statusCode: 200,
      durationMs: 3,
      error: null,
      requestBody: '{}',
      responseBody: 'ok',
      firstAttemptTs: null,
      affectsHealth: false,
    });
    // Six records of one turn, spread over the log's shards; one carries an event type jsonb refuses.
    const records = [
      record(a.appId, subA, 'order.one'),
      record(b.appId, subB, 'order.two'),
      record(a.appId, subA, 'order.\u0000'),
      record(b.appId, subB, 'order.three'),
      record(a.appId, subA, 'order.four'),
      record(b.appId, subB, 'order.five'),
    ];
    const results = await Promise.allSettled(records.map((r) => log.record(r)));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled', 'fulfilled']);
    expect(((results[2] as PromiseRejectedResult).reason as { code: string }).code).toBe('22P05');
    const stored = await s.deps.sql<
      { event_id: string }[]
    >`SELECT event_id FROM webhook_delivery_logs WHERE event_id = ANY(${records.map((r) => r.eventId)}::uuid[])`;
    expect(stored.map((r) => r.event_id).sort()).toEqual(
      records
        .filter((_, i) => i !== 2)
        .map((r) => r.eventId)
        .sort(),
    );
  });
});

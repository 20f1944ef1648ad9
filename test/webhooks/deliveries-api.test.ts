import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { eventually, startReceiver, type Receiver } from './receiver.js';

let s: TestStack;
let a: AppCredentials;
let rx: Receiver;
beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger', 'webhook'], env: { WEBHOOK_RETRY_DELAYS_MS: '0,200,400' } });
  a = await s.createApp();
  rx = await startReceiver();
});
afterAll(async () => {
  await rx.close();
  await s.close();
});

const subscribe = async (auth: AppCredentials, patterns: string[]) => {
  const r = await s.request('POST', '/v1/webhook-subscriptions', {
    auth,
    body: { name: 'd', target_url: rx.url, event_patterns: patterns },
  });
  expect(r.status).toBe(201);
  return r.json.id as string;
};

describe('GET /v1/webhook-deliveries', () => {
  it("lists the deliveries an event caused and shows one with its attempts; another application's are hidden", async () => {
    rx.answer({ status: 500, body: 'boom' }, { status: 200, body: 'ok' });
    const subA = await subscribe(a, ['detail.*']);
    const subB = await subscribe(a, ['detail.one']);
    await subscribe(a, ['other.*']);
    const ev = (await s.request('POST', '/v1/events', { auth: a, body: { event_type: 'detail.one', payload: { n: 1 } } })).json;
    await rx.waitFor(3);
    const deliveries = await eventually(async () => {
      const r = await s.request('GET', `/v1/webhook-deliveries?event_id=${ev.id}`, { auth: a });
      expect(r.status).toBe(200);
      return r.json.data.length === 2 && r.json.data.every((d: { status: string }) => d.status === 'delivered') && r.json.data;
    });
    expect(deliveries.map((d: { subscription_id: string }) => d.subscription_id).sort()).toEqual([subA, subB].sort());
    expect(deliveries.map((d: { attempt_count: number }) => d.attempt_count).sort()).toEqual([1, 2]);

    const retried = deliveries.find((d: { attempt_count: number }) => d.attempt_count === 2);
    const one = await s.request('GET', `/v1/webhook-deliveries/${retried.id}`, { auth: a });
    expect(one.status).toBe(200);
    expect(one.json).toMatchObject({ id: retried.id, event_id: ev.id, status: 'delivered', attempt_count: 2 });
    expect(one.json.attempts.map((l: { attempt_count: number; status: string }) => [l.attempt_count, l.status])).toEqual([
      [2, 'delivered'],
      [1, 'retrying'],
    ]);
    const [last, first] = one.json.attempts;
    expect(first).toMatchObject({ status_code: 500, response_body: 'boom', next_retry_at: expect.any(String) });
    expect(JSON.parse(first.request_body)).toMatchObject({ id: retried.id, event_id: ev.id });
    expect(last.request_headers['x-service-delivery-id']).toBe(retried.id);

    const b = await s.createApp();
    expect((await s.request('GET', `/v1/webhook-deliveries/${retried.id}`, { auth: b })).status).toBe(404);
    expect((await s.request('GET', `/v1/webhook-deliveries?event_id=${ev.id}`, { auth: b })).json.data).toEqual([]);
    expect((await s.request('GET', '/v1/webhook-deliveries/not-an-id', { auth: a })).status).toBe(404);
    expect((await s.request('GET', '/v1/webhook-deliveries', { auth: a })).status).toBe(400);
  });
});

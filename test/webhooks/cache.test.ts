import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnService, startTestStack, type AppCredentials, type ChildService, type TestStack } from '../helpers/stack.js';
import { startReceiver, type Receiver } from './receiver.js';

let s: TestStack;
let a: AppCredentials;
let worker: ChildService;
let rx: Receiver;

beforeAll(async () => {
  // The web (here) and the ledger/webhook workers (another process) share only Postgres and Redis.
  s = await startTestStack({ workers: false });
  worker = spawnService('workers/index.ts', { ...s.env, WORKER_QUEUES: 'ledger,webhook', LOG_LEVEL: 'info' });
  await worker.waitFor(/workers started/);
  a = await s.createApp();
  rx = await startReceiver();
});
afterAll(async () => {
  worker.kill();
  await worker.exited;
  await rx.close();
  await s.close();
});

const emit = async (eventType: string) => {
  const r = await s.request('POST', '/v1/events', { auth: a, body: { event_type: eventType, payload: {} } });
  expect(r.status).toBe(201);
  return r.json.id as string;
};

describe('subscription cache across processes', () => {
  it("sees another process's create, pause, pattern change and resume without a restart", async () => {
    // Warm the worker's cache for this application with no subscriptions.
    await emit('warm.up');
    const c = await s.request('POST', '/v1/webhook-subscriptions', {
      auth: a,
      body: { name: 'x', target_url: rx.url, event_patterns: ['cache.*'] },
    });
    const first = await emit('cache.one');
    await rx.waitFor(1);
    expect(rx.received[0].json.event_id).toBe(first);

    await s.request('PATCH', `/v1/webhook-subscriptions/${c.json.id}`, { auth: a, body: { status: 'PAUSED' } });
    await emit('cache.two');
    await s.request('PATCH', `/v1/webhook-subscriptions/${c.json.id}`, {
      auth: a,
      body: { status: 'ACTIVE', event_patterns: ['other.*'] },
    });
    await emit('cache.three');
    const last = await emit('other.one');
    await rx.waitFor(2);
    expect(rx.received.map((r) => r.json.event_id)).toEqual([first, last]);
  });
});

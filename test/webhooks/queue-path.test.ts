import { queueFor } from '../../src/queues.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnService, startTestStack, type AppCredentials, type ChildService, type TestStack } from '../helpers/stack.js';
import { eventually, startReceiver, type Receiver } from './receiver.js';

let s: TestStack;
let a: AppCredentials;
let worker: ChildService;
let rx: Receiver;

beforeAll(async () => {
  // Ledger here, webhook worker in another process: first attempts must go through the queue.
  s = await startTestStack({ workers: ['ledger'] });
  worker = spawnService('workers/index.ts', { ...s.env, WORKER_QUEUES: 'webhook', LOG_LEVEL: 'info' });
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

describe('first attempts through the queue', () => {
  it('delivers when the ledger process has no webhook worker, with one job per event', async () => {
    await s.request('POST', '/v1/webhook-subscriptions', { auth: a, body: { name: 'q1', target_url: rx.url, event_patterns: ['q.*'] } });
    await s.request('POST', '/v1/webhook-subscriptions', { auth: a, body: { name: 'q2', target_url: rx.url, event_patterns: ['*'] } });
    const ev = await s.request('POST', '/v1/events', { auth: a, body: { event_type: 'q.one', payload: {} } });
    const got = await rx.waitFor(2);
    expect(got.map((g) => g.json.event_id)).toEqual([ev.json.id, ev.json.id]);
    expect(new Set(got.map((g) => g.json.subscription_id)).size).toBe(2);
    await eventually(async () => (await queueFor(s.deps.queues, 'webhook').getJobState(`we-${ev.json.id}`)) === 'completed');
    const [{ n }] = await s.deps
      .sql`SELECT count(*)::int AS n FROM webhook_deliveries WHERE event_id = ${ev.json.id} AND status = 'delivered'`;
    expect(n).toBe(2);
  });
});

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOBS, type LedgerEvent, queueFor } from '../../src/queues.js';
import type { LocalFirstAttempts } from '../../src/webhooks/local-deliverer.js';
import { ledgerProcessor } from '../../workers/ledger.js';
import { createWorkerServices, type WorkerServices } from '../../workers/services.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { startReceiver, type Receiver } from './receiver.js';

let s: TestStack;
let a: AppCredentials;
let rx: Receiver;
const built: WorkerServices[] = [];

beforeAll(async () => {
  // No workers: each test builds the ledger processor itself, from the deps and the services it chooses.
  s = await startTestStack({ workers: false });
  a = await s.createApp();
  rx = await startReceiver();
  const sub = await s.request('POST', '/v1/webhook-subscriptions', {
    auth: a,
    body: { name: 'fan', target_url: rx.url, event_patterns: ['fan.*'] },
  });
  expect(sub.status).toBe(201);
});
afterAll(async () => {
  await Promise.all(built.map((b) => b.close()));
  await rx.close();
  await s.close();
});

const services = (queues: ('ledger' | 'webhook')[]) => {
  const b = createWorkerServices(s.deps, queues);
  built.push(b);
  return b;
};

/** Commits one event through a ledger processor built from these services, as a worker would. */
async function commit(eventType: string, withServices: WorkerServices): Promise<LedgerEvent> {
  const event: LedgerEvent = { id: randomUUID(), app_id: a.appId, event_type: eventType, payload: {}, edges: [], attachments: [] };
  const run = ledgerProcessor.create(s.deps, withServices);
  await run({ data: { event } } as Parameters<typeof run>[0]);
  return event;
}

describe('the ledger fan-out of a worker process', () => {
  it('hands first attempts to the local deliverer of its WorkerServices, with a delayed safety net', async () => {
    const base = services(['ledger', 'webhook']);
    const handed: string[] = [];
    const local: LocalFirstAttempts = {
      take(events) {
        handed.push(...events.map((e) => e.event_id));
        return base.localFirstAttempts!.take(events);
      },
    };
    const event = await commit('fan.local', { ...base, localFirstAttempts: local });
    expect(handed).toEqual([event.id]);
    const [got] = await rx.waitFor(1, (r) => r.json.event_id === event.id);
    expect(got.json.event_type).toBe('fan.local');
    // No job of its own: only the batch's safety net, waiting out its delay.
    expect(await queueFor(s.deps.queues, 'webhook').getJob(`we-${event.id}`)).toBeUndefined();
    const net = JOBS.webhook.jobId({ kind: 'first-attempts-safety-net', events: [{ event_id: event.id, app_id: a.appId }] });
    expect(await queueFor(s.deps.queues, 'webhook').getJobState(net)).toBe('delayed');
  });

  it('queues one first-attempts job per event when its process does not run the webhook queue', async () => {
    const ledgerOnly = services(['ledger']);
    expect(ledgerOnly.localFirstAttempts).toBeUndefined();
    const event = await commit('fan.queued', ledgerOnly);
    const job = await queueFor(s.deps.queues, 'webhook').getJob(`we-${event.id}`);
    expect(job?.name).toBe('first-attempts');
    expect(job?.data).toEqual({ kind: 'first-attempts', event_id: event.id, app_id: a.appId });
    expect(job?.opts.attempts).toBe(8);
    expect(rx.received.some((r) => r.json.event_id === event.id)).toBe(false);
  });
});

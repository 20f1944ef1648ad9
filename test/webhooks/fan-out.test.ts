import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JOBS, type LedgerEvent, queueFor } from '../../src/queues.js';
import { enqueueFirstAttemptsSafetyNet } from '../../src/webhooks/delivery-queue.js';
import type { LocalFirstAttempts } from '../../src/webhooks/local-deliverer.js';
import { holdSafetyNet } from '../../src/webhooks/safety-net.js';
import { ledgerProcessor } from '../../workers/ledger.js';
import { createWorkerServices, type WorkerServices } from '../../workers/services.js';
import type { AppCredentials, TestStack } from '../helpers/stack.js';
import { eventually, type Receiver } from './receiver.js';
import { subscribedStack, type Subscribed } from './subscribed.js';

let w: Subscribed;
let s: TestStack;
let a: AppCredentials;
let rx: Receiver;
const built: WorkerServices[] = [];

beforeAll(async () => {
  // No workers: each test builds the ledger processor itself, from the deps and the services it chooses.
  w = await subscribedStack('fan.*', { workers: false });
  ({ s, app: a, rx } = w);
});
afterAll(async () => {
  await Promise.all(built.map((b) => b.close()));
  await w?.close();
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
  it('hands first attempts to the local deliverer of its WorkerServices, with a delayed safety net removed once they are written', async () => {
    const base = services(['ledger', 'webhook']);
    const handed: string[] = [];
    // The first attempts count as over only when the test says so: the net is seen while they run.
    let over!: () => void;
    const gate = new Promise<void>((r) => (over = r));
    const local: LocalFirstAttempts = {
      take(events) {
        handed.push(...events.map((e) => e.event_id));
        const run = base.localFirstAttempts!.take(events);
        return { taken: run.taken, done: gate.then(() => run.done) };
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
    over();
    await eventually(async () => (await queueFor(s.deps.queues, 'webhook').getJobState(net)) === 'unknown');
    const [row] = await s.deps.sql`SELECT status FROM webhook_deliveries WHERE event_id = ${event.id}`;
    expect(row.status).toBe('delivered');
  });

  it('pushes the safety net back while first attempts run, and leaves it to run when they failed', async () => {
    const queue = queueFor(s.deps.queues, 'webhook');
    const redis = await queue.client;
    const dueAt = async (id: string) => Math.floor(Number(await redis.zscore(queue.keys.delayed, id)) / 0x1000);
    const net = async () => (await enqueueFirstAttemptsSafetyNet(s.deps, [{ event_id: randomUUID(), app_id: a.appId }], 5_500))!;
    const running = await net();
    const firstDue = await dueAt(running.id!);
    let finish!: (written: boolean) => void;
    // Due in 5.5 s: pushed back 5 s before that, again and again while the attempts run.
    holdSafetyNet(s.deps, running, new Promise((r) => (finish = r)), 5_500);
    await eventually(async () => (await dueAt(running.id!)) > firstDue, 5_000, 100);

    const failed = await net();
    const written = await net();
    holdSafetyNet(s.deps, failed, Promise.resolve(false), 5_500);
    holdSafetyNet(s.deps, written, Promise.resolve(true), 5_500);
    finish(true);
    await eventually(
      async () => (await queue.getJobState(written.id!)) === 'unknown' && (await queue.getJobState(running.id!)) === 'unknown',
    );
    expect(await queue.getJobState(failed.id!)).toBe('delayed');
    await failed.remove();
  });

  it('sends nothing twice when the first attempts of an event run again while the first run still waits for its answer', async () => {
    const base = services(['ledger', 'webhook']);
    rx.answer({ status: 200, body: 'ok', delayMs: 1_000 });
    try {
      const event = await commit('fan.again', base);
      // The first run's POST has arrived; its answer is a second away.
      await rx.waitFor(1, (r) => r.json.event_id === event.id);
      // As BullMQ does with a job whose lock lapsed: the same first attempts, run again meanwhile.
      expect(await base.webhooks.firstAttempts({ eventId: event.id, appId: a.appId })).toEqual([]);
      await eventually(
        async () => (await s.deps.sql`SELECT status FROM webhook_deliveries WHERE event_id = ${event.id}`)[0]?.status === 'delivered',
      );
      expect(rx.received.filter((r) => r.json.event_id === event.id)).toHaveLength(1);
    } finally {
      rx.answer({ status: 200, body: 'ok' });
    }
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

import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deliveryIdOf } from '../../src/webhooks/fan-out.js';
import { createSubscriptionCache, type SubscriptionCache } from '../../src/webhooks/subscription-cache.js';
import { startPrivateNats, type PrivateNats } from '../helpers/nats-private.js';
import { addTestStream, type TestStream } from '../helpers/nats-streams.js';
import type { TestStack } from '../helpers/stack.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { emit, serviceFor, settledDeliveries, subscribe } from '../reliability/support/broker-faults.js';
import { eventually } from '../webhooks/receiver.js';

// A delivery that waited in line for its destination's only in-flight slot reads its
// subscription again once it gets the slot: paused or pointed elsewhere meanwhile, it must not
// reach the old destination.
/** DESTINATION_STUCK_MS for this file. */
const STUCK_AFTER_MS = 20_000;
let server: PrivateNats;
let relay: TcpProxy;
let watcher: NatsConnection;
let s: TestStack;
let cache: SubscriptionCache;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  server = await startPrivateNats();
  // The gateway reaches the server through a relay that can hold the server's acks back.
  relay = await startTcpProxy(server.url);
  watcher = await connect({ servers: `127.0.0.1:${server.port}` });
}, 60_000);
afterAll(async () => {
  await watcher?.close();
  await relay?.close();
  await server?.destroy();
});

describe('a broker delivery waiting in line for an in-flight slot', () => {
  serviceFor(
    // A destination held up this long counts as hung (DESTINATION_STUCK_MS): far longer than the
    // steps below take on a loaded machine, so the waiting delivery is still in line at the end.
    { DESTINATION_MAX_IN_FLIGHT: '1', WEBHOOK_TIMEOUT_MS: '30000', DESTINATION_STUCK_MS: String(STUCK_AFTER_MS) },
    (stack) => {
      s = stack;
      // Shares the workers' change feed: its listener runs after theirs, so once it hears a
      // change, the deliverer's cache has dropped what it held.
      cache = createSubscriptionCache(s.deps);
      cleanups.push(() => cache.close());
    },
    cleanups,
  );

  const destinationOn = (st: TestStream) => ({ kind: 'nats', url: `nats://127.0.0.1:${relay.port}`, subject: `${st.prefix}.{event_type}` });

  /**
   * A subscription whose first delivery holds its destination's only slot (its ack held by the
   * relay) and whose second waits in line for it; `change` then edits the subscription through
   * the API and lets the held ack through once the deliverer's cache has dropped what it held.
   */
  async function secondInLine() {
    await cache.ready;
    const app = await s.createApp();
    const stream = await addTestStream(server);
    const sub = await subscribe(s, app, { event_patterns: ['order.*'], destination: destinationOn(stream) });
    // One delivery through first, so the gateway's connection to the server is open when the relay holds its acks.
    await emit(s, app, 'order.warm');
    await settledDeliveries(s, sub.id, 1, 20_000);

    const arrivals = watcher.subscribe(`${stream.prefix}.>`, { max: 1 });
    const firstArrived = (async () => {
      for await (const m of arrivals) return m.subject;
    })();
    await watcher.flush();
    relay.holdReplies();
    const held = Date.now();

    // The first delivery reaches the server and waits for its ack: the only slot is taken.
    const first = await emit(s, app, 'order.first');
    expect(await firstArrived).toBe(`${stream.prefix}.order.first`);
    // The second is taken by the in-process first attempts (their safety-net job is queued as
    // they start), and, its subscription still active then, waits in line for the slot.
    const second = await emit(s, app, 'order.second');
    await eventually(
      async () => {
        const jobs = (await Promise.all(s.deps.queues.shards.webhook.map((q) => q.getJobs(['delayed'])))).flat();
        return jobs.some(
          (j) => j.data.kind === 'first-attempts-safety-net' && j.data.events.some((e: { event_id: string }) => e.event_id === second.id),
        );
      },
      5_000,
      5,
    );

    const change = async (body: Record<string, unknown>) => {
      const changed = new Promise<void>((resolve) => cache.onChange((appId) => appId === app.appId && resolve()));
      const r = await s.request('PATCH', `/v1/webhook-subscriptions/${sub.id}`, { auth: app, body });
      expect(r.status, JSON.stringify(r.json)).toBe(200);
      await changed;
      relay.letRepliesThrough();
      // Past DESTINATION_STUCK_MS the destination counts as hung and sends its waiting deliveries back
      // on their own: the test would then not be testing the second look.
      expect(Date.now() - held, 'the slot must be freed before the destination counts as stuck').toBeLessThan(STUCK_AFTER_MS);
    };
    return { app, sub, stream, first: deliveryIdOf(sub.id, first.id), waited: deliveryIdOf(sub.id, second.id), change };
  }

  const logsOf = async (deliveryId: string) =>
    (
      await s.deps.sql<{ error_message: string | null; status: string }[]>`
        SELECT error_message, status FROM webhook_delivery_logs WHERE delivery_id = ${deliveryId} ORDER BY created_at`
    ).map((l) => [l.status, l.error_message]);

  it('is not published to a subscription paused while it waited, and ends failed, kept for replay', async () => {
    const { sub, stream, first, waited, change } = await secondInLine();
    await change({ status: 'PAUSED' });

    const rows = await settledDeliveries(s, sub.id, 3, 30_000);
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(byId.get(first)?.status).toBe('delivered');
    expect(byId.get(waited)?.status).toBe('failed');
    // Nothing was attempted: its one log line is the refusal to send.
    expect(await logsOf(waited)).toEqual([['failed', 'not sent: subscription is PAUSED']]);
    expect(byId.get(waited)?.attempt_count).toBe(0);

    // The stream holds the first two deliveries and never the one that waited.
    const stored = await stream.messages();
    expect(stored.map((m) => m.msgId).sort()).toEqual([...byId.keys()].filter((id) => id !== waited).sort());
  }, 60_000);

  it('is published where a subscription pointed elsewhere while it waited now delivers, never to the old subject', async () => {
    const { sub, stream, first, waited, change } = await secondInLine();
    const moved = await addTestStream(server);
    await change({ destination: destinationOn(moved) });

    const rows = await settledDeliveries(s, sub.id, 3, 30_000);
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(byId.get(first)?.status).toBe('delivered');
    expect(byId.get(waited)?.status).toBe('delivered');
    // One attempt, the one to the new subject.
    expect(await logsOf(waited)).toEqual([['delivered', null]]);
    expect((await moved.messages()).map((m) => m.msgId)).toEqual([waited]);
    expect((await stream.messages()).map((m) => m.msgId).sort()).toEqual([...byId.keys()].filter((id) => id !== waited).sort());
  }, 60_000);
});

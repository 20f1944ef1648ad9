import { connect, type ChannelModel } from 'amqplib';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRabbitmqSender } from '../../src/destinations/rabbitmq/sender.js';
import { startPrivateRabbitmq, type PrivateRabbitmq } from '../helpers/rabbitmq-private.js';
import type { AppCredentials, TestStack } from '../helpers/stack.js';
import { eventually, startReceiver, type Receiver } from '../webhooks/receiver.js';
import {
  deliveredCount,
  duplicatedIds,
  emit as emitTo,
  serviceFor,
  settledDeliveries,
  subscribe as subscribeTo,
  unconfirmedAttempts,
} from './support/broker-faults.js';

// Faults of a RabbitMQ destination, on a private broker this file kills and restarts (never the machine's).
let broker: PrivateRabbitmq;
let s: TestStack;
let receiver: Receiver;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  [broker, receiver] = await Promise.all([startPrivateRabbitmq({ tls: true }), startReceiver()]);
}, 120_000);
afterAll(async () => {
  await receiver?.close();
  await broker?.destroy();
});

/** The service for one describe block, with `env` beside the fault tests' defaults. */
const stackFor = (env: Parameters<typeof serviceFor>[0]) => serviceFor(env, (stack) => (s = stack), cleanups);
const subscribe = (app: AppCredentials, body: Record<string, unknown>) => subscribeTo(s, app, body);
const emit = (app: AppCredentials, eventType: string) => emitTo(s, app, eventType);

/** A durable topic exchange with a durable queue bound to every key, on the private broker. */
async function durableQueue(name: string) {
  const conn = await connect(broker.url);
  const ch = await conn.createChannel();
  await ch.assertExchange(`${name}.x`, 'topic', { durable: true });
  await ch.assertQueue(`${name}.q`, { durable: true });
  await ch.bindQueue(`${name}.q`, `${name}.x`, '#');
  await conn.close();
  return { exchange: `${name}.x`, queue: `${name}.q` };
}

/** Every message in `queue`, taken off it: the delivery id (`webhook-id` header) of each. */
async function drain(queue: string): Promise<string[]> {
  const conn: ChannelModel = await connect(broker.url);
  try {
    const ch = await conn.createChannel();
    const ids: string[] = [];
    for (;;) {
      const m = await ch.get(queue, { noAck: true });
      if (!m) return ids;
      ids.push(String(m.properties.headers?.['webhook-id']));
    }
  } finally {
    await conn.close();
  }
}

describe('a RabbitMQ destination under broker faults', () => {
  stackFor({});

  it('loses nothing when the broker is killed mid-burst and comes back; other subscriptions are not held up', async () => {
    const a = await s.createApp();
    const b = await s.createApp();
    const { exchange, queue } = await durableQueue('burst');
    const bus = await subscribe(a, {
      event_patterns: ['order.*'],
      destination: { kind: 'rabbitmq', url: broker.url, exchange, routing_key: '{event_type}' },
    });
    await subscribe(a, { event_patterns: ['order.*', 'ping.*'], target_url: `${receiver.url}/a` });
    await subscribe(b, { event_patterns: ['ping.*'], target_url: `${receiver.url}/b` });

    // The burst: 200 events, four requests at a time.
    const BURST = 200;
    let next = 0;
    const burst = Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next < BURST) {
          next++;
          await emit(a, 'order.placed');
        }
      }),
    );
    await eventually(async () => (await deliveredCount(s, bus.id)) >= 30, 30_000);
    await broker.stop('SIGKILL');
    const killedAt = Date.now();

    // While the broker is gone, webhook events of the same application and of another one.
    const posted = new Map<string, number>();
    const pings = (async () => {
      for (let i = 0; i < 10; i++) {
        for (const app of [a, b]) posted.set((await emit(app, 'ping.sent')).id, Date.now());
        await new Promise((r) => setTimeout(r, 300));
      }
    })();
    await pings;
    await broker.start();
    const downMs = Date.now() - killedAt;
    await burst;

    const deliveries = await settledDeliveries(s, bus.id, BURST);
    // Nothing dead-lettered: every delivery ended delivered.
    expect(deliveries.filter((d) => d.status !== 'delivered')).toEqual([]);

    const ids = await drain(queue);
    expect(new Set(ids)).toEqual(new Set(deliveries.map((d) => d.id)));
    // A second copy only of a delivery that was attempted again (a publish whose confirm was lost), never more copies than attempts.
    const unconfirmed = await unconfirmedAttempts(s, bus.id);
    const duplicated = duplicatedIds(ids);
    for (const [id, n] of duplicated) expect(n, `copies of ${id}`).toBeLessThanOrEqual(1 + (unconfirmed.get(id) ?? 0));
    const retried = deliveries.filter((d) => d.attempt_count > 1).length;
    console.info(
      `broker down ${downMs} ms: ${BURST} deliveries, ${retried} attempted more than once, ${unconfirmed.size} with a lost confirm, ${ids.length - BURST} duplicate messages (${duplicated.length} delivery ids)`,
    );

    // Webhook deliveries made while the broker was down arrived promptly, in both applications.
    const got = await receiver.waitFor(posted.size, (r) => posted.has(r.json?.event_id), 30_000);
    const latencies = got.map((r) => r.at - posted.get(r.json.event_id)!);
    expect(new Set(got.map((r) => r.path))).toEqual(new Set(['/hook/a', '/hook/b']));
    expect(Math.max(...latencies)).toBeLessThan(2_000);
  }, 240_000);
});

describe('a RabbitMQ destination’s connection', () => {
  stackFor({});

  /** The broker's client connections, by user (the test's own connections are closed when it asks). */
  const connectionsByUser = async () =>
    (await broker.ctl('list_connections', '--no-table-headers', 'user'))
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .sort();

  it('is closed at once when the destination changes, and when the subscription is paused or deleted', async () => {
    const a = await s.createApp();
    const { exchange, queue } = await durableQueue('retire');
    await broker.ctl('add_user', 'gwsecond', 'second-pass');
    await broker.ctl('set_permissions', '-p', '/', 'gwsecond', '.*', '.*', '.*');
    const destination = (url: string) => ({ kind: 'rabbitmq', url, exchange, routing_key: '{event_type}' });
    const delivered = async (n: number) => eventually(async () => (await drain(queue)).length === n || undefined, 20_000);

    const sub = await subscribe(a, { event_patterns: ['order.*'], destination: destination(broker.url) });
    await emit(a, 'order.placed');
    await delivered(1);
    expect(await connectionsByUser()).toEqual(['guest']);

    // A new URL (another user): the guest connection goes now, not after a minute idle.
    const second = broker.url.replace('guest:guest', 'gwsecond:second-pass');
    const patched = await s.request('PATCH', `/v1/webhook-subscriptions/${sub.id}`, {
      auth: a,
      body: { destination: destination(second) },
    });
    expect(patched.status).toBe(200);
    await emit(a, 'order.placed');
    await delivered(1);
    await eventually(async () => (await connectionsByUser()).join() === 'gwsecond', 20_000, 0);

    const paused = await s.request('PATCH', `/v1/webhook-subscriptions/${sub.id}`, { auth: a, body: { status: 'PAUSED' } });
    expect(paused.status).toBe(200);
    await eventually(async () => (await connectionsByUser()).length === 0, 20_000, 0);

    const other = await subscribe(a, { event_patterns: ['order.*'], destination: destination(broker.url) });
    await emit(a, 'order.placed');
    await delivered(1);
    expect(await connectionsByUser()).toEqual(['guest']);
    expect((await s.request('DELETE', `/v1/webhook-subscriptions/${other.id}`, { auth: a })).status).toBe(204);
    await eventually(async () => (await connectionsByUser()).length === 0, 20_000, 0);
  }, 120_000);
});

describe('a RabbitMQ destination that hangs', () => {
  // Few webhook slots, so a hung broker holding them all would show at once.
  stackFor({ WEBHOOK_CONCURRENCY: '4', DESTINATION_MAX_IN_FLIGHT: '2', WEBHOOK_TIMEOUT_MS: '4000' });

  it('holds at most its in-flight bound of the worker: other subscriptions keep flowing', async () => {
    const a = await s.createApp();
    const b = await s.createApp();
    const { exchange, queue } = await durableQueue('hang');
    const hung = await subscribe(a, {
      event_patterns: ['order.*'],
      destination: { kind: 'rabbitmq', url: broker.url, exchange, routing_key: '{event_type}' },
    });
    await subscribe(a, { event_patterns: ['order.*'], target_url: `${receiver.url}/hang-a` });
    await subscribe(b, { event_patterns: ['ping.*'], target_url: `${receiver.url}/hang-b` });
    const first = await emit(a, 'order.placed');
    await receiver.waitFor(1, (r) => r.json?.event_id === first.id);
    await eventually(async () => (await drain(queue)).length === 1);

    // Accepts TCP, answers nothing: every publish and connect waits for WEBHOOK_TIMEOUT_MS.
    await broker.pause();
    const pausedAt = Date.now();
    cleanups.push(async () => broker.resume());
    const posted = new Map<string, number>();
    for (let i = 0; i < 30; i++) {
      posted.set((await emit(a, 'order.placed')).id, Date.now());
      if (i % 3 === 0) posted.set((await emit(b, 'ping.sent')).id, Date.now());
      // Spread over twice WEBHOOK_TIMEOUT_MS: the hung publishes time out and are tried again meanwhile.
      await new Promise((r) => setTimeout(r, 250));
    }
    const got = await receiver.waitFor(posted.size, (r) => posted.has(r.json?.event_id), 30_000);
    const latencies = got.map((r) => r.at - posted.get(r.json.event_id)!);
    // Under WEBHOOK_TIMEOUT_MS: no webhook delivery waited behind a hung publish.
    expect(Math.max(...latencies)).toBeLessThan(2_000);
    broker.resume();
    const pausedMs = Date.now() - pausedAt;

    const deliveries = await eventually(
      async () => {
        const rows = await s.deps.sql<{ status: string }[]>`SELECT status FROM webhook_deliveries WHERE subscription_id = ${hung.id}`;
        return rows.length === 31 && rows.every((r) => r.status === 'delivered') ? rows : undefined;
      },
      60_000,
      250,
    );
    expect(deliveries).toHaveLength(31);
    // The deliveries over the bound waited without spending attempts: only those in flight timed out.
    const [{ n: timedOut }] = await s.deps.sql<{ n: number }[]>`
      SELECT count(*)::int AS n FROM webhook_delivery_logs WHERE subscription_id = ${hung.id} AND status <> 'delivered'`;
    expect(timedOut).toBeLessThanOrEqual(2 * Math.ceil(pausedMs / 4000) + 2);
    console.info(`broker hung ${pausedMs} ms: webhook latency max ${Math.max(...latencies)} ms, ${timedOut} broker attempts timed out`);
  }, 120_000);
});

describe('a RabbitMQ destination over TLS', () => {
  // The service's trust for a broker behind a private CA: the CA the private broker's certificate was made with.
  stackFor(() => ({ DESTINATION_CA_FILE: join(broker.dir, 'ca.pem') }));

  it('publishes over amqps:// to a broker whose CA the service was given', async () => {
    const a = await s.createApp();
    const { exchange, queue } = await durableQueue('tls');
    await subscribe(a, {
      event_patterns: ['order.*'],
      destination: { kind: 'rabbitmq', url: broker.tlsUrl, exchange, routing_key: '{event_type}' },
    });
    const ev = await emit(a, 'order.placed');
    await eventually(async () => (await drain(queue)).length === 1, 20_000);
    expect((await broker.ctl('list_connections', '--no-table-headers', 'ssl', 'port')).trim()).toBe(`true\t${broker.tlsPort}`);
    const [row] = await s.deps.sql`SELECT status FROM webhook_deliveries WHERE event_id = ${ev.id}`;
    expect(row.status).toBe('delivered');
  });

  it('refuses a certificate it cannot verify (retried), and plain amqp:// under the production policy (failed at once)', async () => {
    const dest = (url: string) => ({ subscriptionId: 'tls-test', secret: url, config: { exchange: '', routing_key: 'q' } });
    const msg = { deliveryId: 'd', appId: 'a', eventType: 'order.placed', body: '{}', headers: {} };
    const untrusting = createRabbitmqSender({ policy: 'any', timeoutMs: 3_000 });
    const production = createRabbitmqSender({ policy: 'public-https', timeoutMs: 3_000 });
    try {
      const unverified = await untrusting.send(dest(broker.tlsUrl!), msg);
      expect(unverified).toMatchObject({ delivered: false, permanent: false });
      expect(unverified.error).toMatch(
        /^the broker's TLS certificate did not verify \(SELF_SIGNED_CERT_IN_CHAIN: self[- ]signed certificate in certificate chain\)$/,
      );
      const plain = await production.send(dest('amqp://gw:pass@broker.example.com/vh'), msg);
      expect(plain).toMatchObject({ delivered: false, permanent: true });
      expect(plain.error).toMatch(/must use amqps/);
    } finally {
      await Promise.all([untrusting.close(), production.close()]);
    }
  });
});

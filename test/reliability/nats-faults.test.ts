import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNatsSender } from '../../src/destinations/nats/sender.js';
import type { DestinationMessage, OpenDestination } from '../../src/destinations/types.js';
import { startPrivateNats, type PrivateNats } from '../helpers/nats-private.js';
import { addTestStream, type TestStream } from '../helpers/nats-streams.js';
import { SHARED_NATS_URL } from '../helpers/servers.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import type { AppCredentials, TestStack } from '../helpers/stack.js';
import { eventually } from '../webhooks/receiver.js';
import {
  deliveredCount,
  duplicatedIds,
  emit as emitTo,
  serviceFor,
  settledDeliveries,
  subscribe as subscribeTo,
} from './support/broker-faults.js';

// Faults of a NATS JetStream destination, on private nats-servers this file kills, hangs and
// restarts (never the machine's, which only carries a second subscription's stream).
let server: PrivateNats;
let tlsServer: PrivateNats;
let s: TestStack;
const cleanups: (() => Promise<unknown>)[] = [];
const streams: TestStream[] = [];

beforeAll(async () => {
  [server, tlsServer] = await Promise.all([startPrivateNats(), startPrivateNats({ tls: true })]);
}, 60_000);
afterAll(async () => {
  // The shared server's streams are deleted; the private ones go with their servers.
  for (const st of streams) await st.delete().catch(() => {});
  await Promise.all([server?.destroy(), tlsServer?.destroy()]);
});

const stackFor = (env: Parameters<typeof serviceFor>[0]) => serviceFor(env, (stack) => (s = stack), cleanups);
const subscribe = (app: AppCredentials, body: Record<string, unknown>) => subscribeTo(s, app, body);
const emit = (app: AppCredentials, eventType: string) => emitTo(s, app, eventType);
const natsDestination = (url: string, st: TestStream) => ({ kind: 'nats', url, subject: `${st.prefix}.{event_type}` });
/** A subscription's failed attempts whose error is `LIKE` `error`, since `since`. */
const failedAttempts = async (subId: string, error: string, since = new Date(0)) =>
  Number(
    (
      await s.deps.sql`SELECT count(*)::int AS n FROM webhook_delivery_logs
        WHERE subscription_id = ${subId} AND status <> 'delivered' AND error_message LIKE ${error} AND created_at >= ${since}`
    )[0].n,
  );

describe('a NATS destination under server faults', () => {
  stackFor({});

  it('loses nothing and stores nothing twice when acks are lost and the server is killed mid-burst; the shared server keeps flowing', async () => {
    const a = await s.createApp();
    const b = await s.createApp();
    const burstStream = await addTestStream(server);
    const shared = await addTestStream({ url: SHARED_NATS_URL });
    streams.push(shared);
    // The gateway reaches the private server through a relay that can lose the server's answers.
    const relay = await startTcpProxy(server.url);
    cleanups.push(() => relay.close());
    const bus = await subscribe(a, {
      event_patterns: ['order.*'],
      destination: natsDestination(`nats://127.0.0.1:${relay.port}`, burstStream),
    });
    const other = await subscribe(b, { event_patterns: ['ping.*'], destination: natsDestination(SHARED_NATS_URL, shared) });

    // The burst: 200 events, four requests at a time, in three parts around the faults.
    const BURST = 200;
    let next = 0;
    const writeUpTo = (n: number) =>
      Promise.all(
        Array.from({ length: 4 }, async () => {
          while (next < n) {
            next++;
            await emit(a, 'order.placed');
          }
        }),
      );
    await writeUpTo(50);
    await eventually(async () => (await deliveredCount(s, bus.id)) >= 30, 30_000);

    // Acks lost: the server stores what the gateway publishes on its open connection, the gateway never hears
    // it and retries on WEBHOOK_TIMEOUT_MS (3 s) under the same Nats-Msg-Id.
    relay.muteReplies();
    await writeUpTo(100);
    await eventually(async () => (await failedAttempts(bus.id, '%no JetStream ack%')) > 0, 30_000);
    const stored = new Set((await burstStream.messages()).map((m) => m.msgId));
    const acked = new Set(
      (
        await s.deps.sql<{ id: string }[]>`SELECT id FROM webhook_deliveries WHERE subscription_id = ${bus.id} AND status = 'delivered'`
      ).map((r) => r.id),
    );
    const storedUnacked = [...stored].filter((id) => !acked.has(id));
    expect(storedUnacked.length).toBeGreaterThan(0);

    // Then the server is killed, with those publishes still unacknowledged, and the rest is written while it is dead.
    await server.stop('SIGKILL');
    const killedAt = Date.now();
    await writeUpTo(BURST);

    // While the private server is dead: the other application's subscription on the shared server delivers,
    // each without waiting behind the dead one (under WEBHOOK_TIMEOUT_MS), all before the restart.
    const posted = new Map<string, number>();
    for (let i = 0; i < 20; i++) posted.set((await emit(b, 'ping.sent')).id, Date.now());
    const arrived = new Map<string, number>();
    await eventually(
      async () => {
        for (const m of await shared.messages()) {
          const eventId = JSON.parse(m.data).event_id as string;
          if (!arrived.has(eventId)) arrived.set(eventId, Date.now());
        }
        return arrived.size === posted.size || undefined;
      },
      30_000,
      50,
    );
    expect(new Set(arrived.keys())).toEqual(new Set(posted.keys()));
    await eventually(async () => (await deliveredCount(s, other.id)) === posted.size, 10_000);
    const latencies = [...posted].map(([id, at]) => arrived.get(id)! - at);
    expect(Math.max(...latencies)).toBeLessThan(3_000);
    // The dead server reached the burst: attempts failed after the kill.
    await eventually(async () => (await failedAttempts(bus.id, '%', new Date(killedAt))) > 0, 30_000);
    expect(server.running()).toBe(false);

    await server.start();
    const downMs = Date.now() - killedAt;
    const deliveries = await settledDeliveries(s, bus.id, BURST);
    // Nothing dead-lettered: every delivery ended delivered.
    expect(deliveries.filter((d) => d.status !== 'delivered')).toEqual([]);

    // Every delivery is in the stream, and once. Each stored-but-unacked one was published again under its
    // Nats-Msg-Id (before the kill and after the restart), and the stream acknowledged it without storing it:
    // its duplicate window (2 minutes, rebuilt from the store at restart) outlasts these retries (under 40 s).
    const ids = (await burstStream.messages()).map((m) => m.msgId);
    expect(new Set(ids)).toEqual(new Set(deliveries.map((d) => d.id)));
    expect(duplicatedIds(ids)).toEqual([]);
    expect(ids).toHaveLength(BURST);
    const attemptsOf = new Map(deliveries.map((d) => [d.id, d.attempt_count]));
    const republished = storedUnacked.reduce((n, id) => n + attemptsOf.get(id)! - 1, 0);
    for (const id of storedUnacked) expect(attemptsOf.get(id)).toBeGreaterThan(1);
    const retried = deliveries.filter((d) => d.attempt_count > 1).length;
    console.info(
      `nats-server down ${downMs} ms: ${BURST} deliveries, ${retried} attempted more than once; ${storedUnacked.length} stored with their ack lost, attempted ${republished} more times under the same Nats-Msg-Id; ${ids.length - BURST} duplicate messages in the stream; shared-server deliveries while down: ${posted.size}, latency max ${Math.max(...latencies)} ms`,
    );
  }, 240_000);
});

describe('a NATS publish to a server that is gone or hangs', () => {
  const TIMEOUT_MS = 2_000;
  /** Over the deadline by at most this: timers and a loaded machine, never a second deadline. */
  const SLACK_MS = 1_500;
  const msg = (id: string): DestinationMessage => ({ deliveryId: id, appId: 'app', eventType: 'order.x', body: '{}', headers: {} });
  /** A destination on the private server, publishing into a stream of its own. */
  const destination = async (): Promise<{ dest: OpenDestination; st: TestStream }> => {
    const st = await addTestStream(server);
    return {
      st,
      dest: {
        subscriptionId: 'sub',
        secret: JSON.stringify({ servers: [server.url] }),
        config: { subject: `${st.prefix}.x`, auth: 'none' },
      },
    };
  };
  afterAll(() => server.resume());

  const timed = async <T>(p: Promise<T>) => {
    const started = performance.now();
    const r = await p;
    return { r, ms: performance.now() - started };
  };

  it('fails within WEBHOOK_TIMEOUT_MS, retryably, on a hung server: on its open connection and on a new one', async () => {
    const { dest } = await destination();
    const open = createNatsSender({ policy: 'any', timeoutMs: TIMEOUT_MS });
    const fresh = createNatsSender({ policy: 'any', timeoutMs: TIMEOUT_MS });
    try {
      expect((await open.send(dest, msg('before'))).delivered).toBe(true);
      await server.pause();
      const onOpen = await timed(open.send(dest, msg('hung-1')));
      expect(onOpen.r).toMatchObject({ delivered: false, permanent: false, error: `no JetStream ack within ${TIMEOUT_MS} ms` });
      expect(onOpen.ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
      expect(onOpen.ms).toBeLessThan(TIMEOUT_MS + SLACK_MS);
      // The socket is accepted by the kernel, the server's greeting never comes.
      const onNew = await timed(fresh.send(dest, msg('hung-2')));
      expect(onNew.r).toMatchObject({ delivered: false, permanent: false });
      expect(onNew.r.error).toMatch(/within 2000 ms|timeout/i);
      expect(onNew.ms).toBeLessThan(TIMEOUT_MS + SLACK_MS);
      server.resume();
      // Back: the next attempt publishes (a new connection if the hung one was given up).
      expect((await open.send(dest, msg('hung-1'))).delivered).toBe(true);
    } finally {
      server.resume();
      await Promise.all([open.close(), fresh.close()]);
    }
  });

  it('fails at once, retryably, when the server is dead: no wait for the deadline', async () => {
    const { dest, st } = await destination();
    const sender = createNatsSender({ policy: 'any', timeoutMs: TIMEOUT_MS });
    try {
      expect((await sender.send(dest, msg('alive'))).delivered).toBe(true);
      await server.stop('SIGKILL');
      const onOpen = await timed(sender.send(dest, msg('dead-1')));
      const again = await timed(sender.send(dest, msg('dead-2')));
      for (const t of [onOpen, again]) {
        expect(t.r).toMatchObject({ delivered: false, permanent: false });
        expect(t.ms).toBeLessThan(TIMEOUT_MS);
      }
      expect(again.r.error).toMatch(/connection refused/i);
      await server.start();
      for (const id of ['dead-1', 'dead-2']) expect((await sender.send(dest, msg(id))).delivered).toBe(true);
      expect((await st.messages()).map((m) => m.msgId)).toEqual(['alive', 'dead-1', 'dead-2']);
    } finally {
      await sender.close();
      if (!server.running()) await server.start();
    }
  });
});

describe('a NATS destination over TLS', () => {
  // The service's trust for a server behind a private CA: the CA the private server's certificate was made with.
  stackFor(() => ({ DESTINATION_CA_FILE: join(tlsServer.dir, 'ca.pem') }));

  it('publishes over tls:// to a server whose CA the service was given', async () => {
    const a = await s.createApp();
    const st = await addTestStream(tlsServer);
    await subscribe(a, { event_patterns: ['order.*'], destination: natsDestination(tlsServer.url, st) });
    const ev = await emit(a, 'order.placed');
    const [row] = await eventually(async () => {
      const rows = await s.deps.sql`SELECT id, status FROM webhook_deliveries WHERE event_id = ${ev.id}`;
      return rows[0]?.status === 'delivered' ? rows : undefined;
    }, 20_000);
    expect((await st.messages()).map((m) => m.msgId)).toEqual([row.id]);
  });

  it('refuses a certificate it cannot verify: retried (the fix is on the server or the operator’s side), the reason in the error', async () => {
    const st = await addTestStream(tlsServer);
    const dest = {
      subscriptionId: 'tls',
      secret: JSON.stringify({ servers: [tlsServer.url] }),
      config: { subject: `${st.prefix}.x`, auth: 'none' },
    };
    const untrusting = createNatsSender({ policy: 'any', timeoutMs: 3_000 });
    try {
      const r = await untrusting.send(dest, { deliveryId: 'd', appId: 'a', eventType: 'order.placed', body: '{}', headers: {} });
      expect(r).toMatchObject({ delivered: false, permanent: false });
      expect(r.error).toMatch(/^the broker's TLS certificate did not verify \(UNABLE_TO_VERIFY_LEAF_SIGNATURE: /);
      expect(await st.messages()).toEqual([]);
    } finally {
      await untrusting.close();
    }
  });
});

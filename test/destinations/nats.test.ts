import { randomBytes } from 'node:crypto';
import { jetstreamManager, type JetStreamManager, type StoredMsg } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '../../clients/typescript/src/index.js';
import { createNatsSender } from '../../src/destinations/nats/sender.js';
import { judgeUrl } from '../../src/net/outbound-policy.js';
import { startPrivateNats, type PrivateNats } from '../helpers/nats-private.js';
import { SHARED_NATS_URL } from '../helpers/servers.js';
import { freePort, startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { eventually } from '../webhooks/receiver.js';
import { destinationApi } from './api.js';

// The machine's NATS with JetStream; every stream here is `gwtest_<random>` on `gwtest.<random>.>`, deleted at the end.
const SERVER = SHARED_NATS_URL;

let s: TestStack;
let a: AppCredentials;
let nc: NatsConnection;
let jsm: JetStreamManager;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  s = await startTestStack({
    workers: ['ledger', 'webhook'],
    env: { WEBHOOK_RETRY_DELAYS_MS: '0,200,400', WEBHOOK_TIMEOUT_MS: '3000', WEBHOOK_DISABLE_AFTER: '100' },
  });
  a = await s.createApp();
  nc = await connect({ servers: SERVER });
  jsm = await jetstreamManager(nc);
});
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
  await nc?.close();
  await s?.close();
});

/** A stream of this test's own capturing `gwtest.<random>.>`; `subject` is that prefix. */
async function stream(manager = jsm) {
  const id = randomBytes(6).toString('hex');
  const name = `gwtest_${id}`;
  await manager.streams.add({ name, subjects: [`gwtest.${id}.>`] });
  cleanups.push(() => manager.streams.delete(name));
  const count = async () => (await manager.streams.info(name)).state.messages;
  const message = (seq: number) => manager.streams.getMessage(name, { seq }) as Promise<StoredMsg>;
  return { name, prefix: `gwtest.${id}`, count, message };
}

const { subscribe, emit, logsOf } = destinationApi(
  () => s,
  () => a,
  'nats',
);

const headersOf = (m: StoredMsg) => Object.fromEntries([...(m.header?.keys() ?? [])].map((k) => [k, m.header!.get(k)]));

describe('nats destination', () => {
  it('publishes the signed webhook body with the delivery id as Nats-Msg-Id, delivered on the JetStream ack', async () => {
    const st = await stream();
    const sub = await subscribe({ url: SERVER, subject: `${st.prefix}.{app_id}.{event_type}` });
    const ev = await emit('order.placed', { total: 5 });
    await emit('invoice.sent');
    const logs = await eventually(async () => {
      const l = await logsOf(sub.id);
      return l.length === 1 && l[0].status === 'delivered' ? l : undefined;
    });
    // Delivered means acked: the message is in the stream when the log says so.
    expect(await st.count()).toBe(1);
    const m = await st.message(1);
    const headers = headersOf(m);
    expect(verifyWebhook(m.string(), headers, sub.secret)).toMatchObject({
      event_id: ev.id,
      event_type: 'order.placed',
      payload: { total: 5 },
    });
    expect(m.subject).toBe(`${st.prefix}.${a.appId}.order.placed`);
    expect(headers['Nats-Msg-Id']).toBe(headers['webhook-id']);
    expect(headers['content-type']).toBe('application/json');
    expect(logs[0].delivery_id).toBe(headers['Nats-Msg-Id']);
    expect(logs[0].request_headers['webhook-signature']).toBe(headers['webhook-signature']);
    expect(logs[0].request_headers['Nats-Msg-Id']).toBe(headers['Nats-Msg-Id']);
  });

  it('replays under the same Nats-Msg-Id, which JetStream drops as a duplicate within its window', async () => {
    const st = await stream();
    const sub = await subscribe({ url: SERVER, subject: `${st.prefix}.{event_type}` }, ['order.replayed']);
    const ev = await emit('order.replayed');
    await eventually(async () => (await logsOf(sub.id)).some((l) => l.status === 'delivered'));
    expect(await st.count()).toBe(1);

    const replay = await s.request('POST', `/v1/webhook-subscriptions/${sub.id}/replay`, {
      auth: a,
      body: { since: new Date(Date.parse(ev.created_at) - 1000).toISOString() },
    });
    expect(replay.status).toBe(202);
    expect(replay.json.queued).toBe(1);
    // The replay was published and acked (a second delivered attempt in the log) ...
    const logs = await eventually(async () => {
      const l = await logsOf(sub.id);
      return l.filter((x) => x.status === 'delivered').length === 2 ? l : undefined;
    });
    expect(new Set(logs.map((l) => l.delivery_id)).size).toBe(1);
    // ... and the stream kept one message: same id, inside the duplicate window.
    expect(await st.count()).toBe(1);
    expect((await st.message(1)).header?.get('Nats-Msg-Id')).toBe(logs[0].delivery_id);
  });

  it('sender: a publish retried with the same delivery id is acked and not stored twice', async () => {
    const st = await stream();
    const sender = createNatsSender({ policy: 'any', timeoutMs: 3000 });
    try {
      const dest = {
        subscriptionId: 'sub',
        secret: JSON.stringify({ servers: [SERVER] }),
        config: { subject: `${st.prefix}.{event_type}`, auth: 'none' },
      };
      const msg = (deliveryId: string) => ({
        deliveryId,
        appId: 'app',
        eventType: 'order.x',
        body: '{}',
        headers: { 'webhook-id': deliveryId },
      });
      expect((await sender.send(dest, msg('d-1'))).delivered).toBe(true);
      expect((await sender.send(dest, msg('d-1'))).delivered).toBe(true);
      expect(await st.count()).toBe(1);
      expect((await sender.send(dest, msg('d-2'))).delivered).toBe(true);
      expect(await st.count()).toBe(2);
    } finally {
      await sender.close();
    }
  });

  it('fails a subject no stream captures at once, with the reason in the log', async () => {
    const sub = await subscribe({ url: SERVER, subject: `gwtest.${randomBytes(6).toString('hex')}.nostream.{event_type}` });
    await emit('order.lost');
    const logs = await eventually(async () => {
      const l = await logsOf(sub.id);
      return l.length > 0 && l[0].status === 'failed' ? l : undefined;
    });
    expect(logs).toHaveLength(1);
    expect(logs[0].attempt_count).toBe(1);
    expect(logs[0].error_message).toMatch(
      /^no JetStream stream captures subject "gwtest\.[0-9a-f]+\.nostream\.order\.lost" \(no responders, 503\)$/,
    );
  });

  it('never returns the credentials', async () => {
    const st = await stream();
    const sub = await subscribe({
      url: SERVER,
      subject: `${st.prefix}.{event_type}`,
      credentials: { type: 'user_password', user: 'gwuser', password: 's3cr3t-pass' },
    });
    expect(sub.destination).toEqual({
      kind: 'nats',
      url: 'nats://127.0.0.1:4222',
      subject: `${st.prefix}.{event_type}`,
      auth: 'user_password',
    });
    expect(sub.target_url).toBe('nats://127.0.0.1:4222');
    const tokenSub = await subscribe({ url: SERVER, subject: `${st.prefix}.t`, credentials: { type: 'token', token: 'tok-s3cr3t' } });
    expect(tokenSub.destination.auth).toBe('token');
    const gql = await s.request('POST', '/graphql', {
      auth: a,
      body: JSON.stringify({
        query: `{ webhookSubscription(id: "${sub.id}") { targetUrl destination { kind url subject auth exchange } } }`,
      }),
    });
    expect(gql.json.data.webhookSubscription).toEqual({
      targetUrl: 'nats://127.0.0.1:4222',
      destination: {
        kind: 'nats',
        url: 'nats://127.0.0.1:4222',
        subject: `${st.prefix}.{event_type}`,
        auth: 'user_password',
        exchange: null,
      },
    });
    const shown = [
      JSON.stringify(sub),
      JSON.stringify(tokenSub),
      JSON.stringify(gql.json),
      JSON.stringify((await s.request('GET', `/v1/webhook-subscriptions/${sub.id}`, { auth: a })).json),
      JSON.stringify((await s.request('GET', '/v1/webhook-subscriptions', { auth: a })).json),
    ];
    for (const text of shown) expect(text).not.toMatch(/gwuser|s3cr3t/);
    const stored = await s.deps
      .sql`SELECT destination_secret_sealed, destination_config FROM webhook_subscriptions WHERE id IN (${sub.id}, ${tokenSub.id})`;
    for (const row of stored) {
      expect(row.destination_secret_sealed).not.toMatch(/s3cr3t|gwuser/);
      expect(JSON.stringify(row.destination_config)).not.toMatch(/s3cr3t|gwuser/);
    }
  });

  it('retries an unreachable server on the webhook schedule, then fails', async () => {
    const port = await freePort();
    const sub = await subscribe({ url: `nats://127.0.0.1:${port}`, subject: 'gwtest.closed' });
    await emit('order.retried');
    const logs = await eventually(async () => {
      const l = await logsOf(sub.id);
      return l.some((x) => x.status === 'failed') ? l : undefined;
    }, 20_000);
    expect(logs.map((l) => [l.attempt_count, l.status])).toEqual([
      [3, 'failed'],
      [2, 'retrying'],
      [1, 'retrying'],
    ]);
    for (const l of logs) expect(l.error_message).toMatch(/connection refused/i);
  });

  it('refuses a bad destination with a 400', async () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ kind: 'nats', subject: 'x' }, 'VALIDATION_ERROR'],
      [{ kind: 'nats', url: SERVER, subject: '{event}' }, 'VALIDATION_ERROR'],
      [{ kind: 'nats', url: SERVER, subject: 'a.*' }, 'VALIDATION_ERROR'],
      [{ kind: 'nats', url: SERVER, subject: 'a..b' }, 'VALIDATION_ERROR'],
      [{ kind: 'nats', url: SERVER, extra: 1 }, 'VALIDATION_ERROR'],
      [{ kind: 'nats', url: 'not a url' }, 'VALIDATION_ERROR'],
      [{ kind: 'nats', url: `${SERVER},` }, 'VALIDATION_ERROR'],
      [{ kind: 'nats', url: SERVER, credentials: { type: 'nkey', seed: 'SUNOTASEED' } }, 'VALIDATION_ERROR'],
      [{ kind: 'nats', url: SERVER, credentials: { type: 'creds', creds: 'no jwt here' } }, 'VALIDATION_ERROR'],
      [{ kind: 'nats', url: SERVER, credentials: { type: 'user_password', user: 'u' } }, 'VALIDATION_ERROR'],
      // The outbound policy's refusals: another scheme, credentials where they would be shown.
      [{ kind: 'nats', url: 'http://127.0.0.1:4222' }, 'INVALID_WEBHOOK_TARGET'],
      [{ kind: 'nats', url: 'nats://u:p@127.0.0.1:4222' }, 'INVALID_WEBHOOK_TARGET'],
      [{ kind: 'nats', url: 'nats://127.0.0.1:4222?tls=0' }, 'INVALID_WEBHOOK_TARGET'],
    ];
    for (const [destination, code] of bad) {
      const r = await s.request('POST', '/v1/webhook-subscriptions', {
        auth: a,
        body: { name: 'bad', event_patterns: ['*'], destination },
      });
      expect([r.status, r.json.error?.code], JSON.stringify(destination)).toEqual([400, code]);
      expect(JSON.stringify(r.json)).not.toMatch(/SUNOTASEED/);
    }
  });
});

describe('outbound policy for NATS URLs', () => {
  it('requires tls:// and a public address in production', () => {
    expect(judgeUrl('nats://nats.example.com:4222', 'nats', 'public-https')).toEqual({ ok: false, reason: 'must use tls' });
    expect(judgeUrl('tls://127.0.0.1:4222', 'nats', 'public-https')).toMatchObject({
      ok: false,
      reason: '127.0.0.1 is not a public address',
    });
    expect(judgeUrl('tls://nats.example.com:4222', 'nats', 'public-https')).toMatchObject({ ok: true, host: 'nats.example.com' });
    expect(judgeUrl('amqps://nats.example.com', 'nats', 'public-https')).toMatchObject({ ok: false });
  });

  it('is judged again at send time: a stored local address is refused under public-https, permanently', async () => {
    const sender = createNatsSender({ policy: 'public-https', timeoutMs: 3000 });
    try {
      const r = await sender.send(
        {
          subscriptionId: 'sub',
          secret: JSON.stringify({ servers: ['tls://127.0.0.1:4222'] }),
          config: { subject: 'gwtest.x', auth: 'none' },
        },
        { deliveryId: 'd', appId: 'app', eventType: 'order.x', body: '{}', headers: {} },
      );
      expect(r).toMatchObject({
        delivered: false,
        permanent: true,
        error: 'refused by the outbound address policy: 127.0.0.1 is not a public address',
      });
    } finally {
      await sender.close();
    }
  });
});

describe('nats destination on a server with users and permissions (its own nats-server)', () => {
  let server: PrivateNats;
  let url: string;
  let admin: NatsConnection;
  let monitor: string;

  beforeAll(async () => {
    server = await startPrivateNats({
      monitor: true,
      conf: `authorization {
  users = [
    { user: admin, password: adminpw }
    { user: gw, password: gwpw, permissions: { publish: { allow: ["gwtest.ok.>"] }, subscribe: { allow: ["_INBOX.>"] } } }
  ]
}`,
    });
    url = server.url;
    monitor = server.monitorUrl!;
    admin = await connect({ servers: url, user: 'admin', pass: 'adminpw' });
    const m = await jetstreamManager(admin);
    await m.streams.add({ name: 'gwtest_ok', subjects: ['gwtest.ok.>'] });
  });
  afterAll(async () => {
    await admin?.close();
    await server?.destroy();
  });

  const send = async (user: string, password: string, subject: string) => {
    const sender = createNatsSender({ policy: 'any', timeoutMs: 3000 });
    try {
      const secret = JSON.stringify({ servers: [url], credentials: { type: 'user_password', user, password } });
      return await sender.send(
        { subscriptionId: 'sub', secret, config: { subject, auth: 'user_password' } },
        { deliveryId: randomBytes(8).toString('hex'), appId: 'app', eventType: 'order.x', body: '{}', headers: {} },
      );
    } finally {
      await sender.close();
    }
  };

  it('authenticates with the sealed credentials and publishes where allowed', async () => {
    expect(await send('gw', 'gwpw', 'gwtest.ok.{event_type}')).toMatchObject({ delivered: true });
  });

  it('fails permission denied at once, with a clear error', async () => {
    const r = await send('gw', 'gwpw', 'gwtest.denied.{event_type}');
    expect(r).toMatchObject({ delivered: false, permanent: true });
    expect(r.error).toMatch(/^permission denied: .*gwtest\.denied\.order\.x/i);
  });

  it("closes a subscription's connection at once when it is retired, and keeps the one asked to keep", async () => {
    /** Connections of the gateway's user on the server (its monitoring endpoint), the admin's left out. */
    const gatewayConnections = async () =>
      ((await (await fetch(`${monitor}/connz?auth=1`)).json()) as { connections?: { authorized_user?: string }[] }).connections?.filter(
        (c) => c.authorized_user === 'gw',
      ).length ?? 0;
    const sender = createNatsSender({ policy: 'any', timeoutMs: 3000 });
    const dest = {
      subscriptionId: 'retired-sub',
      secret: JSON.stringify({ servers: [url], credentials: { type: 'user_password', user: 'gw', password: 'gwpw' } }),
      config: { subject: 'gwtest.ok.{event_type}', auth: 'user_password' },
    };
    const msg = { deliveryId: randomBytes(8).toString('hex'), appId: 'app', eventType: 'order.x', body: '{}', headers: {} };
    try {
      expect(await sender.send(dest, msg)).toMatchObject({ delivered: true });
      expect(await gatewayConnections()).toBe(1);
      sender.retire!('retired-sub', dest);
      expect(await gatewayConnections()).toBe(1);
      sender.retire!('retired-sub');
      await eventually(async () => ((await gatewayConnections()) === 0 ? true : undefined), 5_000);
    } finally {
      await sender.close();
    }
  });

  it('fails wrong credentials at once', async () => {
    const r = await send('gw', 'wrong', 'gwtest.ok.{event_type}');
    expect(r).toMatchObject({ delivered: false, permanent: true });
    expect(r.error).toMatch(/^authentication refused: /);
    expect(r.error).not.toMatch(/wrong/);
  });
});

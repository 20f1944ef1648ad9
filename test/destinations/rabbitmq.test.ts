import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { connect, type ChannelModel, type ConsumeMessage } from 'amqplib';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { judgeUrl } from '../../src/net/outbound-policy.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { eventually } from '../webhooks/receiver.js';
import { destinationApi } from './api.js';

// The machine's RabbitMQ; every exchange and queue here is named `gwtest.<random>.…` and deleted at the end.
const BROKER = 'amqp://guest:guest@127.0.0.1:5672';

let s: TestStack;
let a: AppCredentials;
let broker: ChannelModel;
const cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  s = await startTestStack({
    workers: ['ledger', 'webhook'],
    env: { WEBHOOK_RETRY_DELAYS_MS: '0,200,400', WEBHOOK_TIMEOUT_MS: '3000', WEBHOOK_DISABLE_AFTER: '100' },
  });
  a = await s.createApp();
  broker = await connect(BROKER);
});
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
  await broker?.close();
  await s?.close();
});

/** A topic exchange of this test's own, optionally with a queue bound to every key, consumed into `got`. */
async function exchange(bound: boolean) {
  const name = `gwtest.${randomBytes(6).toString('hex')}`;
  const ch = await broker.createChannel();
  await ch.assertExchange(`${name}.x`, 'topic', { durable: false, autoDelete: false });
  cleanups.push(() => ch.close());
  cleanups.push(() => ch.deleteExchange(`${name}.x`));
  const got: ConsumeMessage[] = [];
  if (bound) {
    await ch.assertQueue(`${name}.q`, { durable: false, autoDelete: false });
    cleanups.push(() => ch.deleteQueue(`${name}.q`));
    await ch.bindQueue(`${name}.q`, `${name}.x`, '#');
    await ch.consume(`${name}.q`, (m) => m && got.push(m), { noAck: true });
  }
  return { exchange: `${name}.x`, got };
}

const { subscribe, emit, logsOf } = destinationApi(
  () => s,
  () => a,
  'rabbitmq',
);

const headersOf = (m: ConsumeMessage) => Object.fromEntries(Object.entries(m.properties.headers ?? {}).map(([k, v]) => [k, String(v)]));

describe('rabbitmq destination', () => {
  it('publishes the signed webhook body, confirmed, persistent, with the delivery id as message id', async () => {
    const { exchange: x, got } = await exchange(true);
    const sub = await subscribe({ url: BROKER, exchange: x, routing_key: 'gw.{app_id}.{event_type}' });
    const ev = await emit('order.placed', { total: 5 });
    await emit('invoice.sent');
    await eventually(async () => got.length >= 1);
    const [m] = got;
    const headers = headersOf(m);
    const body = m.content.toString('utf8');
    expect(new Webhook(sub.secret).verify(body, headers)).toMatchObject({
      event_id: ev.id,
      event_type: 'order.placed',
      payload: { total: 5 },
    });
    expect(m.properties.messageId).toBe(headers['webhook-id']);
    expect(m.properties.contentType).toBe('application/json');
    expect(m.properties.deliveryMode).toBe(2);
    expect(m.fields.routingKey).toBe(`gw.${a.appId}.order.placed`);
    const logs = await eventually(async () => {
      const l = await logsOf(sub.id);
      return l.length === 1 && l[0].status === 'delivered' ? l : undefined;
    });
    expect(logs[0].delivery_id).toBe(m.properties.messageId);
    expect(logs[0].request_headers['webhook-signature']).toBe(headers['webhook-signature']);
    expect(got).toHaveLength(1);

    // Replay sends it again under the same message id (the consumer's de-duplication key).
    const replay = await s.request('POST', `/v1/webhook-subscriptions/${sub.id}/replay`, {
      auth: a,
      body: { since: new Date(Date.parse(ev.created_at) - 1000).toISOString() },
    });
    expect(replay.status).toBe(202);
    expect(replay.json.queued).toBe(1);
    await eventually(async () => got.length >= 2);
    expect(got[1].properties.messageId).toBe(m.properties.messageId);
    expect(new Webhook(sub.secret).verify(got[1].content.toString('utf8'), headersOf(got[1]))).toMatchObject({ event_id: ev.id });
  });

  it('never returns the broker credentials', async () => {
    const { exchange: x } = await exchange(true);
    const sub = await subscribe({ url: 'amqp://gwuser:s3cr3t-pass@127.0.0.1:5672/%2F', exchange: x });
    expect(sub.destination).toEqual({ kind: 'rabbitmq', url: 'amqp://127.0.0.1:5672/%2F', exchange: x, routing_key: '{event_type}' });
    expect(sub.target_url).toBe('amqp://127.0.0.1:5672/%2F');
    const shown = [
      JSON.stringify(sub),
      JSON.stringify((await s.request('GET', `/v1/webhook-subscriptions/${sub.id}`, { auth: a })).json),
      JSON.stringify((await s.request('GET', '/v1/webhook-subscriptions', { auth: a })).json),
    ];
    for (const text of shown) expect(text).not.toMatch(/gwuser|s3cr3t-pass/);
    const [stored] = await s.deps.sql`SELECT destination_secret_sealed, destination_config FROM webhook_subscriptions WHERE id = ${sub.id}`;
    expect(stored.destination_secret_sealed).not.toMatch(/s3cr3t/);
    expect(JSON.stringify(stored.destination_config)).not.toMatch(/s3cr3t/);
  });

  it('sends a test message, switches destination by PATCH, and shows it in GraphQL without credentials', async () => {
    const first = await exchange(true);
    const second = await exchange(true);
    const sub = await subscribe({ url: BROKER, exchange: first.exchange });
    const test = await s.request('POST', `/v1/webhook-subscriptions/${sub.id}/test`, { auth: a });
    expect(test.json).toMatchObject({ success: true, error_message: null });
    await eventually(async () => first.got.length === 1);
    expect(first.got[0].properties.type).toBe('webhook.test');

    const moved = await s.request('PATCH', `/v1/webhook-subscriptions/${sub.id}`, {
      auth: a,
      body: { destination: { kind: 'rabbitmq', url: BROKER, exchange: second.exchange, routing_key: 'moved.{event_type}' } },
    });
    expect(moved.status).toBe(200);
    expect(moved.json.destination).toMatchObject({ exchange: second.exchange, routing_key: 'moved.{event_type}' });
    const onlyUrl = await s.request('PATCH', `/v1/webhook-subscriptions/${sub.id}`, {
      auth: a,
      body: { target_url: 'http://127.0.0.1:1/' },
    });
    expect([onlyUrl.status, onlyUrl.json.error?.code]).toEqual([400, 'VALIDATION_ERROR']);
    await emit('order.moved');
    await eventually(async () => second.got.length === 1);
    expect(second.got[0].fields.routingKey).toBe('moved.order.moved');
    expect(first.got).toHaveLength(1);

    const gql = await s.request('POST', '/graphql', {
      auth: a,
      body: JSON.stringify({
        query: `{ webhookSubscription(id: "${sub.id}") { targetUrl destination { kind url exchange routingKey } } }`,
      }),
    });
    expect(gql.json.data.webhookSubscription).toEqual({
      targetUrl: 'amqp://127.0.0.1:5672',
      destination: { kind: 'rabbitmq', url: 'amqp://127.0.0.1:5672', exchange: second.exchange, routingKey: 'moved.{event_type}' },
    });
    expect(JSON.stringify(gql.json)).not.toMatch(/guest/);
  });

  it('fails an unroutable message at once (mandatory), with the reason in the log', async () => {
    const { exchange: x, got } = await exchange(false);
    const sub = await subscribe({ url: BROKER, exchange: x });
    await emit('order.lost');
    const logs = await eventually(async () => {
      const l = await logsOf(sub.id);
      return l.length > 0 && l[0].status === 'failed' ? l : undefined;
    });
    expect(logs).toHaveLength(1);
    expect(logs[0].attempt_count).toBe(1);
    expect(logs[0].error_message).toMatch(/^unroutable: no queue is bound to exchange ".*" for routing key "order.lost"/);
    expect(got).toHaveLength(0);
  });

  it('fails a missing exchange at once with the broker’s reason', async () => {
    const sub = await subscribe({ url: BROKER, exchange: `gwtest.${randomBytes(6).toString('hex')}.missing` });
    await emit('order.nowhere');
    const logs = await eventually(async () => {
      const l = await logsOf(sub.id);
      return l.length > 0 && l[0].status === 'failed' ? l : undefined;
    });
    expect(logs).toHaveLength(1);
    expect(logs[0].error_message).toMatch(/NOT_FOUND - no exchange/);
  });

  it('retries an unreachable broker on the webhook schedule, then fails', async () => {
    const port = await new Promise<number>((resolve) => {
      const srv = createServer().listen(0, '127.0.0.1', () => {
        const p = (srv.address() as { port: number }).port;
        srv.close(() => resolve(p));
      });
    });
    const sub = await subscribe({ url: `amqp://guest:guest@127.0.0.1:${port}`, exchange: 'gwtest.closed' });
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
    for (const l of logs) expect(l.error_message).toMatch(/ECONNREFUSED/);
  });

  it('refuses a bad destination with 400 VALIDATION_ERROR', async () => {
    const bad = [
      { kind: 'rabbitmq', url: BROKER },
      { kind: 'rabbitmq', url: BROKER, exchange: 'x', routing_key: '{event}' },
      { kind: 'rabbitmq', url: BROKER, exchange: 'bad name' },
      { kind: 'rabbitmq', url: 'not a url', exchange: 'x' },
      { kind: 'rabbitmq', url: BROKER, exchange: 'x', extra: 1 },
      { kind: 'kafka', url: BROKER },
    ];
    for (const destination of bad) {
      const r = await s.request('POST', '/v1/webhook-subscriptions', {
        auth: a,
        body: { name: 'bad', event_patterns: ['*'], destination },
      });
      expect([r.status, r.json.error?.code], JSON.stringify(destination)).toEqual([400, 'VALIDATION_ERROR']);
    }
    const both = await s.request('POST', '/v1/webhook-subscriptions', {
      auth: a,
      body: {
        name: 'bad',
        event_patterns: ['*'],
        target_url: 'http://127.0.0.1:1/',
        destination: { kind: 'rabbitmq', url: BROKER, exchange: 'x' },
      },
    });
    expect([both.status, both.json.error?.code]).toEqual([400, 'VALIDATION_ERROR']);
    const none = await s.request('POST', '/v1/webhook-subscriptions', { auth: a, body: { name: 'bad', event_patterns: ['*'] } });
    expect([none.status, none.json.error?.code]).toEqual([400, 'VALIDATION_ERROR']);
  });
});

describe('outbound policy for broker URLs', () => {
  it('requires amqps and a public address in production, and carries no client options', () => {
    expect(judgeUrl('amqp://broker.example.com', 'amqp', 'public-https')).toEqual({ ok: false, reason: 'must use amqps' });
    expect(judgeUrl('amqps://127.0.0.1', 'amqp', 'public-https')).toMatchObject({ ok: false, reason: '127.0.0.1 is not a public address' });
    expect(judgeUrl('amqps://broker.example.com/vh', 'amqp', 'public-https')).toMatchObject({ ok: true, host: 'broker.example.com' });
    expect(judgeUrl('amqp://127.0.0.1?frameMax=0', 'amqp', 'any')).toEqual({ ok: false, reason: 'must not carry query options' });
    expect(judgeUrl('http://127.0.0.1', 'amqp', 'any')).toMatchObject({ ok: false });
  });
});

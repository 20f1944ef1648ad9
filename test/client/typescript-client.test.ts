import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createGatewayClient,
  GatewayError,
  OPERATIONS,
  verifyWebhook,
  WebhookVerificationError,
  type GatewayClient,
  type OperationFor,
  type Operations,
  type StreamEvent,
} from '../../clients/typescript/src/index.js';
import { offlineOpenApiDocument } from '../../src/http/offline-document.js';
import { FakeServer } from '../fakes/fake-server.js';
import { TelegramFake } from '../fakes/telegram.js';
import { eventually } from '../helpers/connections.js';
import { openSse } from '../helpers/sse.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { apiFetch } from '../helpers/openapi-contract.js';

// The typed client (clients/typescript) against the real service: web and workers in this
// process, real PostgreSQL and Redis, Telegram and the webhook receiver faked by local servers.
let s: TestStack;
let a: AppCredentials;
let gateway: GatewayClient;
let tg: TelegramFake;
let receiver: FakeServer;
let proxy: TcpProxy;

beforeAll(async () => {
  [tg, receiver] = await Promise.all([TelegramFake.start(), FakeServer.start(() => ({ status: 200 }))]);
  // Two streams per application: the cap test fills it; the others never hold more than two
  // (a cut stream's slot may outlive it briefly while its replacement connects).
  s = await startTestStack({ workers: ['ledger', 'send', 'webhook'], env: { STREAM_MAX_PER_APP: '2' } });
  a = await s.createApp();
  gateway = createGatewayClient({ baseUrl: s.base, apiKey: a.apiKey, appId: a.appId });
  proxy = await startTcpProxy(s.base);
});
afterAll(async () => {
  await proxy?.close();
  await s?.close();
  await Promise.all([tg?.close(), receiver?.close()]);
});

/** The named method of an operation, found by method and path whatever the document names it. */
function operation<M extends string, P extends string>(client: GatewayClient, method: M, path: P) {
  const name = (Object.keys(OPERATIONS) as (keyof Operations)[]).find(
    (n) => OPERATIONS[n].method === method && OPERATIONS[n].path === path,
  );
  if (!name) throw new Error(`no operation ${method} ${path} in the client`);
  return client.ops[name] as Operations[OperationFor<P, M>];
}

/** Records a custom event of `type` and returns it as stored (201). */
async function record(type: string, payload: Record<string, unknown> = {}) {
  const e = await gateway.createEvent({ event_type: type, payload });
  if (!('cursor' in e)) throw new Error(`event ${e.id} was not committed within the wait bound`);
  return e;
}

describe('the generated client', () => {
  it('has a method for every operation the service serves, from the document the generator reads', async () => {
    const served = (await (await apiFetch(`${s.base}/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, unknown>> };
    // The generator builds the document offline; it must be the one the service serves.
    expect(served.paths).toEqual((offlineOpenApiDocument() as typeof served).paths);
    const servedOps = Object.entries(served.paths).flatMap(([path, item]) => Object.keys(item).map((method) => `${method} ${path}`));
    const clientOps = Object.values(OPERATIONS).map((o) => `${o.method} ${o.path}`);
    expect(clientOps.sort()).toEqual(servedOps.sort());
    expect(Object.keys(gateway.ops).sort()).toEqual(Object.keys(OPERATIONS).sort());
    for (const [name, o] of Object.entries(OPERATIONS)) {
      const id = (served.paths[o.path][o.method] as { operationId?: string }).operationId;
      if (id) expect(name).toBe(id);
    }
  });

  it('answers the success body, and rejects with the status and code of a refusal', async () => {
    const e = await record('client.get');
    const getEvent = operation(gateway, 'get', '/v1/events/{id}');
    expect(await getEvent({ params: { path: { id: e.id } } })).toEqual(e);
    const missing = await getEvent({ params: { path: { id: '00000000-0000-4000-8000-000000000000' } } }).catch((err: unknown) => err);
    expect(missing).toBeInstanceOf(GatewayError);
    expect(missing).toMatchObject({ status: 404, code: 'NOT_FOUND' });

    const stranger = createGatewayClient({ baseUrl: s.base, apiKey: 'not-a-key', appId: a.appId });
    await expect(stranger.rest.GET('/v1/events')).resolves.toMatchObject({ response: { status: 401 } });
    await expect(stranger.createEvent({ event_type: 'client.x', payload: {} })).rejects.toMatchObject({
      status: 401,
      code: 'UNAUTHORIZED',
    });
  });
});

describe('events', () => {
  it('creates with an Idempotency-Key: a retry answers the same event, another body under the key is refused', async () => {
    const first = await gateway.createEvent({ event_type: 'client.idem', payload: { n: 1 } }, { idempotencyKey: 'client-idem-1' });
    const retry = await gateway.createEvent({ event_type: 'client.idem', payload: { n: 1 } }, { idempotencyKey: 'client-idem-1' });
    expect(retry.id).toBe(first.id);
    const conflict = await gateway
      .createEvent({ event_type: 'client.idem', payload: { n: 2 } }, { idempotencyKey: 'client-idem-1' })
      .catch((err: unknown) => err);
    expect(conflict).toMatchObject({ status: 409, code: 'IDEMPOTENCY_CONFLICT' });
    const stored = [];
    for await (const e of gateway.paginate('/v1/events', { query: { event_type: 'client.idem' } })) stored.push(e.id);
    expect(stored).toEqual([first.id]);
  });

  it('pages through a listing with the async iterator, one request per page, in cursor order', async () => {
    const created = [];
    for (let n = 0; n < 7; n++) created.push((await record('client.page', { n })).id);
    const requests: string[] = [];
    const counting = createGatewayClient({
      baseUrl: s.base,
      apiKey: a.apiKey,
      appId: a.appId,
      fetch: (input, init) => {
        requests.push(input instanceof Request ? input.url : String(input));
        return fetch(input, init);
      },
    });
    const seen = [];
    for await (const e of counting.paginate('/v1/events', { query: { event_type: 'client.page', limit: 3 } })) {
      expect(e.event_type).toBe('client.page');
      seen.push(e.id);
    }
    expect(seen).toEqual(created);
    expect(requests).toHaveLength(3);
    expect(new URL(requests[1]).searchParams.get('after')).toEqual(expect.any(String));

    // Breaking out of the loop fetches no further page.
    requests.length = 0;
    for await (const e of counting.paginate('/v1/events', { query: { event_type: 'client.page', limit: 3 } })) {
      expect(e.id).toBe(created[0]);
      break;
    }
    expect(requests).toHaveLength(1);
  });
});

describe('files', () => {
  it('uploads bytes as multipart and reads them back', async () => {
    const text = 'résumé of the client test\n';
    const stored = await gateway.uploadFile(new Blob([text]), 'résumé.txt');
    expect(stored).toMatchObject({ id: expect.any(String), size_bytes: Buffer.byteLength(text) });
    const { data } = await gateway.rest.GET('/v1/files/{id}/content', { params: { path: { id: stored.id } }, parseAs: 'text' });
    expect(data).toBe(text);
  });
});

describe('the event stream', () => {
  it('resumes a cut connection by Last-Event-ID: every event once, in order, no gap and no duplicate', async () => {
    const marker = await record('client.stream', { n: 0 });
    const before = [];
    for (let n = 1; n <= 3; n++) before.push((await record('client.stream', { n })).id);

    const viaProxy = createGatewayClient({ baseUrl: proxy.url, apiKey: a.apiKey, appId: a.appId });
    const connects: (string | undefined)[] = [];
    const events = viaProxy
      .stream({ eventTypes: ['client.stream'], lastEventId: marker.cursor, reconnectDelayMs: 50, onConnect: (c) => connects.push(c) })
      [Symbol.asyncIterator]();
    const take = async (n: number) => {
      const got: StreamEvent[] = [];
      while (got.length < n) {
        const r = await events.next();
        if (r.done) throw new Error('the stream iterator ended');
        got.push(r.value);
      }
      return got;
    };
    try {
      const first = await take(3);
      expect(first.map((e) => e.id)).toEqual(before);
      expect(first[0]).toMatchObject({ eventType: 'client.stream', payload: { n: 1 }, cursor: expect.any(String) });

      proxy.cutAll();
      const after = [];
      for (let n = 4; n <= 6; n++) after.push((await record('client.stream', { n })).id);
      const second = await take(3);
      expect(second.map((e) => e.id)).toEqual(after);

      // It reconnected once, sending the cursor of the last event it had seen.
      expect(connects).toEqual([marker.cursor, first[2].cursor]);
      expect(proxy.heads).toHaveLength(2);
      expect(proxy.heads[1].toLowerCase()).toContain(`last-event-id: ${first[2].cursor.toLowerCase()}\r\n`);
    } finally {
      await events.return?.();
    }
  });

  it("waits out a 429 while the application's streams are at their cap, then streams", async () => {
    const c = await s.createApp();
    const statuses: number[] = [];
    const client = createGatewayClient({
      baseUrl: s.base,
      apiKey: c.apiKey,
      appId: c.appId,
      fetch: async (input, init) => {
        const r = await fetch(input, init);
        if (String(input).includes('/events/stream')) statuses.push(r.status);
        return r;
      },
    });
    const marker = await client.createEvent({ event_type: 'client.cap', payload: {} });
    const holders = [
      await openSse(`${s.base}/events/stream`, { headers: c.headers }),
      await openSse(`${s.base}/events/stream`, { headers: c.headers }),
    ];
    expect(holders.map((h) => h.status)).toEqual([200, 200]);

    const events = client.stream({
      eventTypes: ['client.cap'],
      lastEventId: (marker as { cursor: string }).cursor,
      maxReconnectDelayMs: 50,
    });
    const first = events.next();
    await eventually(async () => statuses.filter((st) => st === 429).length >= 2, 10_000, 'two refused attempts');
    for (const h of holders) h.close();
    const e = await client.createEvent({ event_type: 'client.cap', payload: { n: 1 } });
    expect((await first).value).toMatchObject({ id: e.id, payload: { n: 1 } });
    expect(statuses.at(-1)).toBe(200);
    await events.return();
  });

  it('ends with a GatewayError when the service refuses the stream, without retrying', async () => {
    const connects: unknown[] = [];
    const stranger = createGatewayClient({ baseUrl: s.base, apiKey: 'not-a-key', appId: a.appId });
    const it = stranger.stream({ reconnectDelayMs: 10, onConnect: (c) => connects.push(c) });
    await expect(it.next()).rejects.toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
    expect(connects).toHaveLength(1);
  });
});

describe('GraphQL', () => {
  it('runs mutations over graphql-http and subscribes to eventStream over graphql-sse from a cursor', async () => {
    const marker = await record('client.gql');
    const created = await gateway.graphql.query<{ createEvent: { id: string; eventType: string } }>(
      'mutation($p: JSON) { createEvent(eventType: "client.gql", payload: $p) { id eventType } }',
      { p: { via: 'graphql-http' } },
    );
    expect(created.errors).toBeUndefined();
    expect(created.data?.createEvent.eventType).toBe('client.gql');

    const results = gateway.graphql.subscribe<{ eventStream: { id: string; payload: { via: string } } }>(
      'subscription($after: String) { eventStream(eventTypes: ["client.gql"], after: $after) { id payload } }',
      { after: marker.cursor },
    );
    const first = await results.next();
    await results.return?.();
    expect(first.value).toEqual({ data: { eventStream: { id: created.data?.createEvent.id, payload: { via: 'graphql-http' } } } });

    const refused = await createGatewayClient({ baseUrl: s.base, apiKey: 'not-a-key', appId: a.appId })
      .graphql.query('{ events(first: 1) { edges { node { id } } } }')
      .catch((err: unknown) => err);
    expect(String(refused)).toMatch(/401/);
  });
});

describe('sending messages', () => {
  it('sends through a Telegram connection with an Idempotency-Key: the retry reaches the platform once', async () => {
    const createConnection = operation(gateway, 'post', '/v1/platform-connections');
    const conn = await createConnection({
      body: { platform_name: 'TELEGRAM', name: 'client test', config: { bot_token: '777002:client-bot-token', api_base_url: tg.url } },
    });
    const message = { platform_connection_id: conn.id, to_external_id: '4242', message: 'hello from the client' };
    const sent = await gateway.sendMessage(message, { idempotencyKey: 'client-send-1' });
    expect(sent).toMatchObject({ id: expect.any(String), status: 'sent', external_message_id: '1' });
    const retry = await gateway.sendMessage(message, { idempotencyKey: 'client-send-1' });
    expect(retry.id).toBe(sent.id);
    expect(tg.server.requests).toHaveLength(1);
    expect(tg.server.requests[0].json).toEqual({ chat_id: '4242', text: 'hello from the client' });

    const refused = await gateway.sendMessage({ ...message, to_external_id: '@nobody' }).catch((err: unknown) => err);
    expect(refused).toMatchObject({ status: 400, code: 'INVALID_RECIPIENT' });
  });
});

describe('webhooks', () => {
  const subscribe = (pattern: string, secret?: string) => {
    const createSubscription = operation(gateway, 'post', '/v1/webhook-subscriptions');
    return createSubscription({
      body: { name: pattern, target_url: `${receiver.url}/${pattern}`, event_patterns: [pattern], ...(secret ? { secret } : {}) },
    });
  };

  it('verifies a delivery signed with a generated secret the Standard Webhooks way', async () => {
    const sub = await subscribe('client.hook');
    expect(sub.secret).toMatch(/^whsec_/);
    const e = await record('client.hook', { n: 1 });
    const [delivery] = await receiver.waitFor(1, (r) => r.path === '/client.hook');
    expect(delivery.headers['webhook-signature']).toMatch(/^v1,/);

    const body = verifyWebhook(delivery.rawBody, delivery.headers, sub.secret!);
    expect(body).toMatchObject({ subscription_id: sub.id, event_id: e.id, event_type: 'client.hook', payload: { n: 1 } });

    const tampered = Buffer.from(delivery.rawBody.toString().replace('"n":1', '"n":2'));
    expect(() => verifyWebhook(tampered, delivery.headers, sub.secret!)).toThrow(WebhookVerificationError);
    expect(() => verifyWebhook(delivery.rawBody, delivery.headers, `whsec_${Buffer.alloc(32, 7).toString('base64')}`)).toThrow(
      WebhookVerificationError,
    );
    const late = new Date(Number(delivery.headers['webhook-timestamp']) * 1000 + 301_000);
    expect(() => verifyWebhook(delivery.rawBody, delivery.headers, sub.secret!, { now: late })).toThrow(WebhookVerificationError);

    // During a rotation deliveries carry a signature per secret: the old and the new one each verify.
    const rotate = operation(gateway, 'post', '/v1/webhook-subscriptions/{id}/rotate-secret');
    const { secret: next } = await rotate({ params: { path: { id: sub.id } } });
    await record('client.hook', { n: 2 });
    const [, rotated] = await receiver.waitFor(2, (r) => r.path === '/client.hook');
    expect(rotated.headers['webhook-signature'].split(' ')).toHaveLength(2);
    for (const secrets of [next, sub.secret!, [sub.secret!, next]]) {
      expect(verifyWebhook(rotated.rawBody, rotated.headers, secrets)).toMatchObject({ payload: { n: 2 } });
    }
    expect(() => verifyWebhook(rotated.rawBody, rotated.headers, [`whsec_${Buffer.alloc(32, 8).toString('base64')}`])).toThrow(
      WebhookVerificationError,
    );
  });

  it("verifies a delivery signed with the client's own secret by its X-Service-Signature", async () => {
    const secret = 'a-secret-the-client-chose-0123456789';
    const sub = await subscribe('client.spec', secret);
    const e = await record('client.spec', { n: 1 });
    const [delivery] = await receiver.waitFor(1, (r) => r.path === '/client.spec');
    expect(delivery.headers['webhook-signature']).toBeUndefined();
    expect(delivery.headers['x-service-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);

    expect(verifyWebhook(delivery.rawBody, delivery.headers, secret)).toMatchObject({ subscription_id: sub.id, event_id: e.id });
    expect(() => verifyWebhook(delivery.rawBody, delivery.headers, `${secret}x`)).toThrow(WebhookVerificationError);
    expect(() => verifyWebhook(`${delivery.rawBody} `, delivery.headers, secret)).toThrow(WebhookVerificationError);
    const late = new Date(Number(delivery.headers['x-service-timestamp']) * 1000 - 301_000);
    expect(() => verifyWebhook(delivery.rawBody, delivery.headers, secret, { now: late })).toThrow(WebhookVerificationError);
    expect(verifyWebhook(delivery.rawBody, delivery.headers, secret, { now: late, toleranceSeconds: 400 })).toMatchObject({
      event_id: e.id,
    });

    // The order the client had before (secrets first) is refused by type, naming the argument, and
    // never mistaken for a forged delivery.
    const swapped = verifyWebhook as unknown as (...args: unknown[]) => unknown;
    expect(() => swapped(secret, delivery.rawBody, delivery.headers)).toThrow(
      new TypeError("verifyWebhook(rawBody, headers, secrets): headers must be the request's headers (an object or Headers), got a Buffer"),
    );
    expect(() => swapped([secret], delivery.headers, delivery.rawBody)).toThrow(/rawBody must be the body as received .* got an array/);
    expect(() => swapped(delivery.rawBody, delivery.headers, delivery.headers)).toThrow(/secrets must be .* got an object/);
  });
});

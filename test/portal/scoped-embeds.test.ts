import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { asSession as asSessionOf, exchangeLink, type SignedIn } from '../helpers/portal.js';
import { openSse, take } from '../helpers/sse.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';

let s: TestStack;
let app: AppCredentials;
let rx: Receiver;
/** Event ids by channel, in ledger order. */
const ids = { acme: [] as string[], globex: [] as string[], none: [] as string[] };
/** The team's own subscription (made with a key): it sees every event, the witness of what a scoped one must not. */
let witness: string;

async function record(event_type: string, channels?: string[]): Promise<string> {
  const r = await s.request('POST', '/v1/events', { auth: app, body: { event_type, payload: { secret: event_type }, channels } });
  expect(r.status, r.text).toBe(201);
  return r.json.id;
}

beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger', 'webhook'] });
  app = await s.createApp();
  rx = await startReceiver();
  const w = await s.request('POST', '/v1/webhook-subscriptions', {
    auth: app,
    body: { name: 'team', target_url: `${rx.url}/team`, event_patterns: ['*'] },
  });
  expect(w.status, w.text).toBe(201);
  witness = w.json.id;
  ids.acme.push(await record('order.created', ['acme']));
  ids.globex.push(await record('order.created', ['globex']));
  ids.acme.push(await record('order.paid', ['acme', 'vip']));
  ids.none.push(await record('order.created'));
  ids.globex.push(await record('order.paid', ['globex']));
});
afterAll(async () => {
  await rx.close();
  await s.close();
});

async function scopedSession(body: Record<string, unknown>): Promise<SignedIn> {
  const r = await s.request('POST', '/v1/portal/sessions', { auth: app, body });
  expect(r.status, r.text).toBe(201);
  return exchangeLink(s, r.json.url);
}
const acmeSession = () => scopedSession({ areas: ['events', 'webhooks'], scope: { channels: ['acme'] } });
const asSession = (si: SignedIn, method: string, path: string, body?: unknown) => asSessionOf(s, si, method, path, body);

describe('channels on events', () => {
  it('are stored, answered and filter GET /v1/events (any of several, comma-separated)', async () => {
    const one = await s.request('GET', `/v1/events/${ids.acme[1]}`, { auth: app });
    expect(one.json.channels).toEqual(['acme', 'vip']);
    const globex = await s.request('GET', '/v1/events?channel=globex', { auth: app });
    expect(globex.json.data.map((e: { id: string }) => e.id)).toEqual(ids.globex);
    const either = await s.request('GET', '/v1/events?channel=vip,globex', { auth: app });
    expect(either.json.data.map((e: { id: string }) => e.id)).toEqual([ids.globex[0], ids.acme[1], ids.globex[1]]);
  });

  it('are bounded and validated like other input: 400 VALIDATION_ERROR, nothing stored', async () => {
    const [{ n: before }] = await s.deps.sql`SELECT count(*)::int AS n FROM events WHERE app_id = ${app.appId}`;
    for (const channels of [Array.from({ length: 21 }, (_, i) => `c${i}`), ['a b'], ['x'.repeat(65)], [''], 'acme', [1]]) {
      const r = await s.request('POST', '/v1/events', { auth: app, body: { event_type: 'order.bad', payload: {}, channels } });
      expect(r.status, JSON.stringify(channels)).toBe(400);
      expect(r.json.error.code).toBe('VALIDATION_ERROR');
    }
    const [{ n: after }] = await s.deps.sql`SELECT count(*)::int AS n FROM events WHERE app_id = ${app.appId}`;
    expect(after).toBe(before);
    expect((await s.request('GET', '/v1/events?channel=a%20b', { auth: app })).status).toBe(400);
  });

  it('filter GraphQL events, and GraphQL createEvent takes them', async () => {
    const q = await s.gql(app, '{ events(filters: { channels: ["globex"] }) { edges { node { id channels } } } }');
    expect(q.json.errors).toBeUndefined();
    expect(q.json.data.events.edges.map((e: { node: { id: string } }) => e.node.id)).toEqual(ids.globex);
    const bad = await s.gql(app, '{ events(filters: { channels: ["no spaces"] }) { edges { node { id } } } }');
    expect(bad.json.errors[0].extensions.code).toBe('VALIDATION_ERROR');
  });

  it('filter the SSE stream and the GraphQL subscription', async () => {
    const sse = await openSse(`${s.base}/events/stream?channels=globex&lastEventId=`, { headers: app.headers });
    expect(sse.status).toBe(200);
    const frames = await take(sse, 2);
    expect(frames.map((f) => JSON.parse(f.data!).id)).toEqual(ids.globex);
    sse.close();

    const gql = await openSse(`${s.base}/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...app.headers },
      body: JSON.stringify({ query: 'subscription { eventStream(channels: ["globex"]) { id channels } }' }),
    });
    expect(gql.status).toBe(200);
    await record('order.shipped', ['acme']);
    const shipped = await record('order.shipped', ['globex']);
    const [next] = await take(gql, 1);
    expect(JSON.parse(next.data!).data.eventStream).toEqual({ id: shipped, channels: ['globex'] });
    ids.acme.push((await s.request('GET', '/v1/events?channel=acme&order=desc&limit=1', { auth: app })).json.data[0].id);
    ids.globex.push(shipped);
    gql.close();
  });
});

describe("webhook subscriptions' channels", () => {
  it('select events on REST and GraphQL: replay queues those channels only', async () => {
    const made = await s.gql(
      app,
      `mutation { createWebhookSubscription(name: "globex", targetUrl: "${rx.url}/globex", eventPatterns: ["order.*"], channels: ["globex"]) { id channels } }`,
    );
    expect(made.json.errors).toBeUndefined();
    const sub = made.json.data.createWebhookSubscription;
    expect(sub.channels).toEqual(['globex']);
    const replay = await s.request('POST', `/v1/webhook-subscriptions/${sub.id}/replay`, {
      auth: app,
      body: { since: '2000-01-01T00:00:00Z' },
    });
    expect(replay.status, replay.text).toBe(202);
    expect(replay.json.queued).toBe(ids.globex.length);
    const cleared = await s.request('PATCH', `/v1/webhook-subscriptions/${sub.id}`, {
      auth: app,
      body: { channels: null, status: 'PAUSED' },
    });
    expect(cleared.json.channels).toBeNull();
    const bad = await s.request('POST', '/v1/webhook-subscriptions', {
      auth: app,
      body: { name: 'x', target_url: rx.url, event_patterns: ['*'], channels: ['no spaces'] },
    });
    expect(bad.status).toBe(400);
  });
});

describe('minting a scoped portal session', () => {
  it('takes channels and/or event-type patterns, for the events and webhooks areas only', async () => {
    const [{ n: before }] = await s.deps.sql`SELECT count(*)::int AS n FROM portal_sessions`;
    for (const body of [
      { areas: ['all'], scope: { channels: ['acme'] } },
      { areas: ['events'], scope: {} },
      { areas: ['events'], scope: { channels: [] } },
      { areas: ['events'], scope: { channels: ['a b'] } },
      { areas: ['events'], scope: { event_types: ['[bad'] } },
      { areas: ['events'], scope: { channels: ['acme'], tenant: 'x' } },
    ]) {
      const r = await s.request('POST', '/v1/portal/sessions', { auth: app, body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.error.code).toBe('VALIDATION_ERROR');
    }
    const [{ n: after }] = await s.deps.sql`SELECT count(*)::int AS n FROM portal_sessions`;
    expect(after).toBe(before);
    const si = await acmeSession();
    expect(si.body.scope).toEqual({ channels: ['acme'] });
    expect(si.body.areas).toEqual(['webhooks', 'events']);
    expect(si.body.scopes).toEqual(['events:read', 'admin']);
  });

  it('from the operator CLI with --channels, for the events and webhooks areas only', async () => {
    const open = await runCli(s.env, ['portal', 'open', '--app', app.appId, '--areas', 'events', '--channels', 'acme']);
    expect(open.code, open.stderr).toBe(0);
    const si = await exchangeLink(s, JSON.parse(open.stdout).url);
    expect(si.body.scope).toEqual({ channels: ['acme'] });
    expect((await asSession(si, 'GET', '/v1/events')).json.data.map((e: { id: string }) => e.id)).toEqual(ids.acme);
    const all = await runCli(s.env, ['portal', 'open', '--app', app.appId, '--channels', 'acme']);
    expect(all.code).not.toBe(0);
    expect(all.stdout).toBe('');
  });
});

describe('a session scoped to one channel', () => {
  it('lists and reads only its channel on REST; another channel is empty or not found', async () => {
    const si = await acmeSession();
    const list = await asSession(si, 'GET', '/v1/events');
    expect(list.status, list.text).toBe(200);
    expect(list.json.data.map((e: { id: string }) => e.id)).toEqual(ids.acme);
    expect((await asSession(si, 'GET', '/v1/events?channel=globex')).json.data).toEqual([]);
    for (const id of [...ids.globex, ...ids.none]) expect((await asSession(si, 'GET', `/v1/events/${id}`)).status).toBe(404);
    expect((await asSession(si, 'GET', `/v1/events/${ids.acme[0]}`)).status).toBe(200);
  });

  it('pages without skipping: a short page still carries the cursor of the last event read', async () => {
    const si = await acmeSession();
    const seen: string[] = [];
    let after = '';
    for (let i = 0; i < 20; i++) {
      const page = await asSession(si, 'GET', `/v1/events?limit=1${after ? `&after=${after}` : ''}`);
      seen.push(...page.json.data.map((e: { id: string }) => e.id));
      if (!page.json.has_more) break;
      after = page.json.next_cursor;
    }
    expect(seen).toEqual(ids.acme);
  });

  it('streams only its channel over SSE (catch-up and live), whatever filter it asks for', async () => {
    const si = await acmeSession();
    const all = await openSse(`${s.base}/events/stream?lastEventId=`, { headers: { Cookie: si.cookie } });
    expect(all.status).toBe(200);
    const caught = await take(all, ids.acme.length);
    expect(caught.map((f) => JSON.parse(f.data!).id)).toEqual(ids.acme);
    const other = await openSse(`${s.base}/events/stream?channels=globex`, { headers: { Cookie: si.cookie } });
    expect(other.status).toBe(200);
    const globex = await record('order.live', ['globex']);
    const acme = await record('order.live', ['acme']);
    ids.globex.push(globex);
    ids.acme.push(acme);
    const [live] = await take(all, 1);
    expect(JSON.parse(live.data!).id).toBe(acme);
    // The globex-filtered stream of an acme session: the globex event was committed first and never came.
    expect(other.pending()).toBe(0);
    all.close();
    other.close();
  });

  it('cannot reach GraphQL (queries or subscriptions): the whole API is not confinable', async () => {
    const si = await acmeSession();
    const q = await asSession(si, 'POST', '/graphql', { query: '{ events { edges { node { id } } } }' });
    expect(q.status).toBe(403);
    const sub = await openSse(`${s.base}/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Cookie: si.cookie, 'X-CSRF-Token': si.csrf },
      body: JSON.stringify({ query: 'subscription { eventStream { id } }' }),
    });
    expect(sub.status).toBe(403);
  });

  it("subscribes only within its channel: a '*' subscription gets its events alone, live and on replay", async () => {
    const si = await acmeSession();
    const made = await asSession(si, 'POST', '/v1/webhook-subscriptions', {
      name: 'acme hook',
      target_url: `${rx.url}/acme`,
      event_patterns: ['*'],
    });
    expect(made.status, made.text).toBe(201);
    expect(made.json.scope).toEqual({ channels: ['acme'] });
    const sub = made.json.id;

    // Live: a globex event then an acme one. The witness's delivery of the globex event is made
    // in the same first-attempts job as any other subscription's would be.
    const globex = await record('order.refunded', ['globex']);
    const acme = await record('order.refunded', ['acme']);
    ids.globex.push(globex);
    ids.acme.push(acme);
    await rx.waitFor(1, (r) => r.path.endsWith('/team') && r.json.event_id === globex);
    const [got] = await rx.waitFor(1, (r) => r.path.endsWith('/acme'));
    expect(got.json.event_id).toBe(acme);
    expect(got.json.channels).toEqual(['acme']);
    const stray = await s.deps.sql`SELECT event_id FROM webhook_deliveries WHERE subscription_id = ${sub} AND event_id <> ${acme}`;
    expect(stray).toEqual([]);

    // Widened by its maker to every channel and then to globex alone: still never outside acme.
    const widened = await asSession(si, 'PATCH', `/v1/webhook-subscriptions/${sub}`, { channels: ['globex'] });
    expect(widened.status, widened.text).toBe(200);
    const replay = await asSession(si, 'POST', `/v1/webhook-subscriptions/${sub}/replay`, { since: '2000-01-01T00:00:00Z' });
    expect(replay.status, replay.text).toBe(202);
    expect(replay.json.queued).toBe(0);
    expect((await asSession(si, 'PATCH', `/v1/webhook-subscriptions/${sub}`, { channels: null })).status).toBe(200);
    const again = await asSession(si, 'POST', `/v1/webhook-subscriptions/${sub}/replay`, { since: '2000-01-01T00:00:00Z' });
    expect(again.status, again.text).toBe(202);
    // Every acme event but the live one, which was delivered and is re-sent: all of acme's.
    expect(again.json.queued).toBe(ids.acme.length);
    const replayed = await rx.waitFor(1 + ids.acme.length, (r) => r.path.endsWith('/acme'));
    expect(new Set(replayed.map((r) => r.json.event_id))).toEqual(new Set(ids.acme));
    const [{ n }] = await s.deps.sql`
      SELECT count(*)::int AS n FROM webhook_deliveries WHERE subscription_id = ${sub} AND NOT (event_id = ANY(${ids.acme}::uuid[]))`;
    expect(n).toBe(0);
  });

  it('sees, replays and reads the attempts of no other subscription: they are not found', async () => {
    const si = await acmeSession();
    const list = await asSession(si, 'GET', '/v1/webhook-subscriptions');
    expect(list.json.data.map((x: { id: string }) => x.id)).not.toContain(witness);
    for (const [method, path, body] of [
      ['GET', `/v1/webhook-subscriptions/${witness}`],
      ['PATCH', `/v1/webhook-subscriptions/${witness}`, { event_patterns: ['order.*'] }],
      ['DELETE', `/v1/webhook-subscriptions/${witness}`],
      ['POST', `/v1/webhook-subscriptions/${witness}/replay`, { since: '2000-01-01T00:00:00Z' }],
      ['POST', `/v1/webhook-subscriptions/${witness}/rotate-secret`],
      ['POST', `/v1/webhook-subscriptions/${witness}/test`],
      ['GET', `/v1/webhook-subscriptions/${witness}/deliveries`],
    ] as const) {
      const r = await asSession(si, method, path, body);
      expect(r.status, `${method} ${path}`).toBe(404);
    }
    const [teamDelivery] = await s.deps.sql<{ id: string }[]>`
      SELECT id FROM webhook_deliveries WHERE subscription_id = ${witness} AND event_id = ${ids.globex[0]}`;
    expect((await asSession(si, 'GET', `/v1/webhook-deliveries/${teamDelivery.id}`)).status).toBe(404);
    expect((await asSession(si, 'POST', `/v1/webhook-deliveries/${teamDelivery.id}/retry`)).status).toBe(404);
    expect((await asSession(si, 'GET', `/v1/webhook-deliveries?event_id=${ids.globex[0]}`)).json.data).toEqual([]);
    // The witness is untouched, and the team still sees it.
    expect((await s.request('GET', `/v1/webhook-subscriptions/${witness}`, { auth: app })).json.event_patterns).toEqual(['*']);
  });

  it('cannot write events, make keys or reach anything outside its areas', async () => {
    const si = await acmeSession();
    for (const [method, path, body] of [
      ['POST', '/v1/events', { event_type: 'order.forged', payload: {}, channels: ['globex'] }],
      ['POST', '/v1/api-keys', { scopes: ['events:read'] }],
      ['GET', '/v1/users'],
      ['GET', '/v1/event-schemas'],
    ] as const) {
      expect((await asSession(si, method, path, body)).status, `${method} ${path}`).toBe(403);
    }
  });
});

describe('a session scoped to event types', () => {
  it('sees only matching types, on every channel', async () => {
    const si = await scopedSession({ areas: ['events'], scope: { event_types: ['order.paid'] } });
    const list = await asSession(si, 'GET', '/v1/events?limit=500');
    const types = new Set(list.json.data.map((e: { event_type: string }) => e.event_type));
    expect([...types]).toEqual(['order.paid']);
    expect(list.json.data.length).toBe(2);
  });
});

describe('an unscoped embed (for your own team)', () => {
  it('keeps seeing every subscription and event, as before', async () => {
    const si = await scopedSession({ areas: ['webhooks', 'events'] });
    expect(si.body.scope).toBeNull();
    const subs = await asSession(si, 'GET', '/v1/webhook-subscriptions');
    expect(subs.json.data.map((x: { id: string }) => x.id)).toContain(witness);
    expect((await asSession(si, 'GET', `/v1/events/${ids.globex[0]}`)).status).toBe(200);
  });
});

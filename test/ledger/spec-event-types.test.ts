import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as P from '../fakes/inbound/payloads.js';
import { metaHeaders, telegramHeaders } from '../fakes/inbound/signers.js';
import { TelegramFake } from '../fakes/telegram.js';
import { WhatsappFake } from '../fakes/whatsapp.js';
import { connect, sampleConfigs } from '../helpers/connections.js';
import { openSse, take, type SseClient } from '../helpers/sse.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { postWebhook, queuesIdle, waitForEvent } from '../inbound/helpers.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';

/**
 * docs/events.md, name by name: a client that subscribes by the name the API gives — a webhook pattern,
 * an SSE or GraphQL stream filter, GET /v1/events?event_type= — receives the event that name
 * stands for, produced the way a real client produces it (platform webhooks, REST sends, link
 * codes). `message.read` and friends are other names of a stored `message.status`; the service
 * stores each fact once and delivers it under its stored type.
 */

let s: TestStack;
let app: AppCredentials;
let rx: Receiver;
let tgFake: TelegramFake;
let waFake: WhatsappFake;
let tg: { id: string; path: string };
let wa: { id: string; path: string };
/** The ledger position before anything below happened: every stream and listing reads after it. */
let start: string;
/** Streams opened before the flows ran: they see the events live. */
const live = new Map<string, SseClient>();

const WA = sampleConfigs().WHATSAPP as { phone_number_id: string; business_account_id: string; app_secret: string };
const TG_SECRET = (sampleConfigs().TELEGRAM as { secret_token: string }).secret_token;
const WA_USER = '16505551234';

/** Each event type name the API gives (`message.<platform>.inbound` for both platforms used), the `*` wildcard, and a custom type. */
const NAMES = [
  'message.inbound',
  'message.outbound',
  'message.delivered',
  'message.read',
  'message.failed',
  'message.status',
  'message.reaction',
  'message.telegram.inbound',
  'message.whatsapp.inbound',
  'link_code.generated',
  'link_code.activation',
  'user.merged',
  'order.placed',
  'message.*',
] as const;
type Name = (typeof NAMES)[number];

interface Stored {
  id: string;
  event_type: string;
  payload: Record<string, any>;
}

/**
 * What each name selects, spelled out here from the documented names rather than taken from the service: the
 * stored type, narrowed by the payload for the names that stand for part of a type.
 */
const SELECTS: Record<Name, (e: Stored) => boolean> = {
  'message.inbound': (e) => e.event_type === 'message.inbound',
  'message.outbound': (e) => e.event_type === 'message.outbound',
  'message.delivered': (e) => e.event_type === 'message.status' && e.payload.status === 'delivered',
  'message.read': (e) => e.event_type === 'message.status' && e.payload.status === 'read',
  'message.failed': (e) => e.event_type === 'message.status' && e.payload.status === 'failed',
  'message.status': (e) => e.event_type === 'message.status',
  'message.reaction': (e) => e.event_type === 'message.reaction',
  'message.telegram.inbound': (e) => e.event_type === 'message.inbound' && e.payload.platform === 'telegram',
  'message.whatsapp.inbound': (e) => e.event_type === 'message.inbound' && e.payload.platform === 'whatsapp',
  'link_code.generated': (e) => e.event_type === 'link_code.generated',
  'link_code.activation': (e) => e.event_type === 'link_code.activation',
  'user.merged': (e) => e.event_type === 'user.merged',
  'order.placed': (e) => e.event_type === 'order.placed',
  'message.*': (e) => e.event_type.startsWith('message.'),
};

const subscriptionOf = new Map<string, string>();
let expected: Map<Name, Stored[]>;

const postWa = (payload: object) => {
  const body = JSON.stringify(payload);
  return postWebhook(s, wa.path, body, metaHeaders(WA.app_secret, body));
};
const sseUrl = (name: string) => `${s.base}/events/stream?eventTypes=${encodeURIComponent(name)}`;
const openStream = (name: string) => openSse(sseUrl(name), { headers: { ...app.headers, 'Last-Event-ID': start } });

/** Sends a text to the WhatsApp user through POST /v1/messages; returns the platform's message id. */
async function sendToWhatsapp(text: string): Promise<string> {
  const r = await s.request('POST', '/v1/messages', {
    auth: app,
    body: { platform_connection_id: wa.id, to_external_id: `+${WA_USER}`, message: text },
  });
  expect(r.status, r.text).toBeLessThan(300);
  const sent = await waitForEvent(s, app.appId, 'message.outbound', (e) => e.payload.message.text === text);
  return sent.payload.external_message_id as string;
}

beforeAll(async () => {
  [tgFake, waFake, rx] = await Promise.all([TelegramFake.start(), WhatsappFake.start(), startReceiver()]);
  s = await startTestStack({ env: { SEND_WAIT_MS: '0' } });
  app = await s.createApp();
  const configs = sampleConfigs({ TELEGRAM: tgFake.url, WHATSAPP: waFake.url });
  const withPath = (c: { id: string; webhook_url: string }) => ({ id: c.id, path: new URL(c.webhook_url).pathname });
  tg = withPath(await connect(s, app, 'TELEGRAM', configs.TELEGRAM));
  wa = withPath(await connect(s, app, 'WHATSAPP', configs.WHATSAPP));

  const mark = await s.request('POST', '/v1/events', { auth: app, body: { event_type: 'spec.start', payload: {} } });
  expect(mark.status, mark.text).toBe(201);
  start = mark.json.cursor;

  for (const name of NAMES) {
    const r = await s.request('POST', '/v1/webhook-subscriptions', {
      auth: app,
      body: { name, target_url: `${rx.url}?name=${encodeURIComponent(name)}`, event_patterns: [name] },
    });
    expect(r.status, `${name}: ${r.text}`).toBe(201);
    subscriptionOf.set(name, r.json.id);
    const c = await openStream(name);
    expect(c.status, `${name}: ${c.text}`).toBe(200);
    live.set(name, c);
  }

  // The flows a client runs, each producing some of the documented events.
  const tgIn = await postWebhook(s, tg.path, JSON.stringify(P.tgText(7001, 41, 'hello from telegram')), telegramHeaders(TG_SECRET));
  expect(tgIn.status, tgIn.text).toBe(200);
  expect((await postWa(P.waText(WA.business_account_id, WA.phone_number_id, WA_USER, 'wamid.IN1', 'hello from whatsapp'))).status).toBe(
    200,
  );
  await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.platform === 'whatsapp');
  const readOne = await sendToWhatsapp('first reply');
  // One at a time: inbound jobs run concurrently, and a `read` recorded first would make the
  // `delivered` after it a step backwards, which is never recorded.
  for (const status of ['delivered', 'read']) {
    expect((await postWa(P.waStatus(WA.business_account_id, WA.phone_number_id, readOne, status, WA_USER))).status).toBe(200);
    await waitForEvent(s, app.appId, 'message.status', (e) => e.payload.status === status);
  }
  const failedOne = await sendToWhatsapp('second reply');
  const failure = [{ code: 131026, title: 'Message undeliverable' }];
  expect((await postWa(P.waStatus(WA.business_account_id, WA.phone_number_id, failedOne, 'failed', WA_USER, failure))).status).toBe(200);
  expect((await postWa(P.waReaction(WA.business_account_id, WA.phone_number_id, WA_USER, 'wamid.RE1', readOne, '👍'))).status).toBe(200);
  await waitForEvent(s, app.appId, 'message.reaction', () => true);
  await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.platform === 'telegram');

  // Link the Telegram person to the WhatsApp one: a code, its activation, and the merge it makes.
  const [waUser] = await s.deps.sql<{ user_id: string }[]>`
    SELECT user_id FROM platform_users WHERE app_id = ${app.appId} AND platform = 'WHATSAPP' AND is_system_user = false`;
  const [tgUser] = await s.deps.sql<{ id: string }[]>`
    SELECT id FROM platform_users WHERE app_id = ${app.appId} AND platform = 'TELEGRAM' AND is_system_user = false`;
  const code = await s.request('POST', '/v1/link-codes', { auth: app, body: { user_id: waUser.user_id } });
  expect(code.status, code.text).toBe(201);
  const activation = await s.request('POST', `/v1/link-codes/${code.json.code}/activate`, {
    auth: app,
    body: { platform_user_id: tgUser.id },
  });
  expect(activation.status, activation.text).toBeLessThan(300);
  const custom = await s.request('POST', '/v1/events', { auth: app, body: { event_type: 'order.placed', payload: { total: 12 } } });
  expect(custom.status, custom.text).toBe(201);

  await waitForEvent(s, app.appId, 'link_code.activation', () => true);
  // The webhook queue keeps delayed safety-net jobs: idle is asked of the queues that write events.
  await queuesIdle(s, 10_000, ['inbound', 'send', 'transcription', 'ledger']);
  const stored = await s.deps.sql<(Stored & { seq: number })[]>`
    SELECT id, event_type, payload, seq FROM events WHERE app_id = ${app.appId} AND event_type <> 'spec.start' ORDER BY seq`;
  expected = new Map(NAMES.map((n) => [n, stored.filter(SELECTS[n])]));
}, 60_000);

afterAll(async () => {
  for (const c of live.values()) c.close();
  await s?.close();
  await Promise.all([rx?.close(), tgFake?.close(), waFake?.close()]);
});

describe('every event type the API names can be subscribed to by its name', () => {
  it('produced every row of the table (the flows above are what the other tests read)', () => {
    for (const name of NAMES) expect(expected.get(name)!.length, name).toBeGreaterThan(0);
    expect(expected.get('message.status')!.map((e) => e.payload.status)).toEqual(['delivered', 'read', 'failed']);
    expect(
      expected
        .get('message.inbound')!
        .map((e) => e.payload.platform)
        .sort(),
    ).toEqual(['telegram', 'whatsapp']);
  });

  it.each(NAMES)('a webhook subscribed to %s receives exactly its events, under their stored type', async (name) => {
    const want = expected.get(name)!;
    const mine = (r: { path: string }) => new URL(r.path, 'http://x').searchParams.get('name') === name;
    await rx.waitFor(want.length, mine);
    const bodies = rx.received.filter(mine).map((r) => r.json);
    expect(bodies.map((b) => b.event_id).sort()).toEqual(want.map((e) => e.id).sort());
    for (const b of bodies) {
      const event = want.find((e) => e.id === b.event_id)!;
      expect(b.subscription_id).toBe(subscriptionOf.get(name));
      expect(b.event_type).toBe(event.event_type);
      expect(b.payload).toEqual(event.payload);
    }
    // An event matched by mistake would have its delivery beside the right ones (an event's
    // first attempts are made together for every subscription it matches).
    const rows = await s.deps.sql<{ event_id: string }[]>`
      SELECT event_id FROM webhook_deliveries WHERE app_id = ${app.appId} AND subscription_id = ${subscriptionOf.get(name)!}`;
    expect(rows.map((r) => r.event_id).sort()).toEqual(want.map((e) => e.id).sort());
  });

  it.each(['message.read', 'message.failed', 'message.telegram.inbound'] as const)(
    'a replay of the subscription to %s from before it happened re-sends exactly its events',
    async (name) => {
      const want = expected.get(name)!;
      const mine = (r: { path: string }) => new URL(r.path, 'http://x').searchParams.get('name') === name;
      await rx.waitFor(want.length, mine);
      const r = await s.request('POST', `/v1/webhook-subscriptions/${subscriptionOf.get(name)}/replay`, {
        auth: app,
        body: { since: start },
      });
      expect(r.status, r.text).toBe(202);
      expect(r.json.queued + r.json.already_queued).toBe(want.length);
      const again = await rx.waitFor(2 * want.length, mine);
      expect(
        again
          .slice(want.length)
          .map((x) => x.json.event_id)
          .sort(),
      ).toEqual(want.map((e) => e.id).sort());
    },
  );

  it.each(NAMES)('an SSE stream filtered on %s, open while it happened, sends exactly its events in order', async (name) => {
    const want = expected.get(name)!;
    const frames = await take(live.get(name)!, want.length);
    expect(frames.map((f) => JSON.parse(f.data!).id)).toEqual(want.map((e) => e.id));
    expect(frames.map((f) => JSON.parse(f.data!).eventType)).toEqual(want.map((e) => e.event_type));
    // Every matching event was committed before the flows' queues drained: nothing more is due.
    expect(live.get(name)!.pending()).toBe(0);
  });

  it.each(NAMES)('an SSE stream filtered on %s, resumed from before it happened, replays exactly its events', async (name) => {
    const want = expected.get(name)!;
    const c = await openStream(name);
    try {
      const frames = await take(c, want.length);
      expect(frames.map((f) => JSON.parse(f.data!).id)).toEqual(want.map((e) => e.id));
      // The catch-up is done once its events are out; a duplicate or stray event would follow them.
      await expect(c.next(300)).rejects.toThrow(/no SSE frame/);
    } finally {
      c.close();
    }
  });

  it.each(NAMES)('GET /v1/events?event_type=%s lists exactly its events', async (name) => {
    const want = expected.get(name)!;
    const r = await s.request('GET', `/v1/events?after=${encodeURIComponent(start)}&limit=500&event_type=${encodeURIComponent(name)}`, {
      auth: app,
    });
    expect(r.status, r.text).toBe(200);
    expect(r.json.data.map((e: { id: string }) => e.id)).toEqual(want.map((e) => e.id));
    expect(r.json.data.map((e: { event_type: string }) => e.event_type)).toEqual(want.map((e) => e.event_type));
  });

  it.each(['message.read', 'message.delivered', 'message.failed', 'message.telegram.inbound', 'user.merged'] as const)(
    'the GraphQL events query filtered on %s lists exactly its events',
    async (name) => {
      const r = await s.gql(
        app,
        'query ($t: String!, $a: String) { events(filters: { eventType: { equals: $t } }, after: $a, first: 500) { edges { node { id eventType } } } }',
        {
          t: name,
          a: start,
        },
      );
      expect(r.json.errors, r.text).toBeUndefined();
      const nodes = r.json.data.events.edges.map((e: { node: { id: string; eventType: string } }) => e.node);
      expect(nodes.map((n: { id: string }) => n.id)).toEqual(expected.get(name)!.map((e) => e.id));
    },
  );

  it.each(['message.read', 'message.failed', 'message.whatsapp.inbound', 'message.*'] as const)(
    'a GraphQL eventStream on %s replays exactly its events',
    async (name) => {
      const want = expected.get(name)!;
      const c = await openSse(`${s.base}/graphql`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...app.headers },
        body: JSON.stringify({
          query: 'subscription ($t: [String!], $a: String) { eventStream(eventTypes: $t, after: $a) { id eventType } }',
          variables: { t: [name], a: start },
        }),
      });
      try {
        expect(c.status, c.text).toBe(200);
        const frames = await take(c, want.length);
        const nodes = frames.map((f) => JSON.parse(f.data!).data.eventStream as { id: string; eventType: string });
        expect(nodes.map((n) => n.id)).toEqual(want.map((e) => e.id));
        expect(nodes.map((n) => n.eventType)).toEqual(want.map((e) => e.event_type));
      } finally {
        c.close();
      }
    },
  );

  it('the prefix filter of a listing reaches an alias whose stored type lies outside the prefix', async () => {
    const r = await s.request('GET', `/v1/events?after=${encodeURIComponent(start)}&event_type=message.rea*`, { auth: app });
    expect(r.status, r.text).toBe(200);
    const want = [...expected.get('message.read')!, ...expected.get('message.reaction')!].map((e) => e.id).sort();
    expect(r.json.data.map((e: { id: string }) => e.id).sort()).toEqual(want);
  });
});

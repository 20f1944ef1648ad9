import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { take } from '../helpers/sse.js';
import { mergedEvent, mergeUsers } from '../../src/identity/merge.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { commit, parse, stream, type EventSpec } from './helpers.js';

let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;

beforeAll(async () => {
  s = await startTestStack({ workers: false, env: { STREAM_BACKFILL: '3', STREAM_RECHECK_MS: '300' } });
  a = await s.createApp();
  b = await s.createApp();
});
afterAll(() => s.close());

const cursorOf = async (appId: string, id: string) => {
  const r = await s.request('GET', `/v1/events/${id}`, { auth: appId === a.appId ? a : b });
  return r.json.cursor as string;
};

describe('GET /events/stream', () => {
  it('sends the last STREAM_BACKFILL events as id/data frames shaped like events nodes, then live events', async () => {
    const app = await s.createApp();
    const old = await commit(
      s.deps,
      app.appId,
      [1, 2, 3, 4, 5].map((i) => ({ event_type: 'order.placed', payload: { i } })),
    );
    const c = await stream(s.base, app);
    expect(c.status).toBe(200);
    expect(c.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const backfill = await take(c, 3);
    expect(backfill.map((f) => parse(f).id)).toEqual(old.slice(2));
    const first = parse(backfill[0]);
    expect(first).toMatchObject({ appId: app.appId, eventType: 'order.placed', payload: { i: 3 }, edges: [], attachments: [] });
    expect(first.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(backfill[0].id).toBe(first.cursor);

    const live = await commit(s.deps, app.appId, [{ payload: { i: 6 } }, { payload: { i: 7 } }]);
    expect((await take(c, 2)).map((f) => parse(f).id)).toEqual(live);
    c.close();
  });

  it('counts only matching events toward the backfill', async () => {
    const app = await s.createApp();
    const specs: EventSpec[] = [];
    for (let i = 0; i < 6; i++) specs.push({ event_type: 'keep.it', payload: { i } }, { event_type: 'skip.it', payload: { i } });
    const ids = await commit(s.deps, app.appId, specs);
    const kept = ids.filter((_, i) => i % 2 === 0);
    const c = await stream(s.base, app, '?eventTypes=keep.*');
    const got = await take(c, 3);
    expect(got.map((f) => parse(f).id)).toEqual(kept.slice(3));
    const [sentinel] = await commit(s.deps, app.appId, [{ event_type: 'keep.end' }]);
    expect(parse((await take(c, 1))[0]).id).toBe(sentinel);
    c.close();
  });

  it('resumes strictly after Last-Event-ID with every event in order, then continues live', async () => {
    const ids = await commit(
      s.deps,
      a.appId,
      Array.from({ length: 8 }, (_, i) => ({ payload: { i } })),
    );
    const after = await cursorOf(a.appId, ids[1]);
    const c = await stream(s.base, a, '', { headers: { 'Last-Event-ID': after } });
    expect((await take(c, 6)).map((f) => parse(f).id)).toEqual(ids.slice(2));
    const live = await commit(s.deps, a.appId, [{ payload: { live: 1 } }]);
    expect(parse((await take(c, 1))[0]).id).toBe(live[0]);
    c.close();
  });

  it('accepts the cursor as ?lastEventId= for browser EventSource reconnects; the header wins when both are sent', async () => {
    const ids = await commit(s.deps, a.appId, [{}, {}, {}]);
    const q = await stream(s.base, a, `?lastEventId=${await cursorOf(a.appId, ids[0])}`);
    expect((await take(q, 2)).map((f) => parse(f).id)).toEqual(ids.slice(1));
    q.close();
    const both = await stream(s.base, a, `?lastEventId=${await cursorOf(a.appId, ids[0])}`, {
      headers: { 'Last-Event-ID': await cursorOf(a.appId, ids[1]) },
    });
    expect(parse((await take(both, 1))[0]).id).toBe(ids[2]);
    both.close();
  });

  it('resumes from a cursor of a long history in pages without gaps (more than one catch-up page)', async () => {
    const app = await s.createApp();
    const [first] = await commit(s.deps, app.appId, [{ event_type: 'start' }]);
    const ids: string[] = [];
    for (let k = 0; k < 3; k++)
      ids.push(
        ...(await commit(
          s.deps,
          app.appId,
          Array.from({ length: 400 }, (_, i) => ({ payload: { k, i } })),
        )),
      );
    const c = await stream(s.base, app, '', {
      headers: { 'Last-Event-ID': (await s.request('GET', `/v1/events/${first}`, { auth: app })).json.cursor },
    });
    const got = await take(c, ids.length, 20_000);
    expect(got.map((f) => parse(f).id)).toEqual(ids);
    c.close();
  });

  it('shows only the authenticated application events', async () => {
    const ca = await stream(s.base, a, `?lastEventId=${await cursorOf(a.appId, (await commit(s.deps, a.appId, [{}]))[0])}`);
    await commit(s.deps, b.appId, [{ event_type: 'b.secret' }, { event_type: 'b.secret' }]);
    const [mine] = await commit(s.deps, a.appId, [{ event_type: 'a.visible' }]);
    const [next] = await take(ca, 1);
    expect(parse(next)).toMatchObject({ id: mine, appId: a.appId });
    ca.close();
  });

  it('filters by eventTypes patterns, conversationId and userId (platform user or its user), AND-combined, in catch-up and live alike', async () => {
    const app = await s.createApp();
    const [user] = await s.deps.sql<{ id: string }[]>`INSERT INTO users (app_id, name) VALUES (${app.appId}, 'U') RETURNING id`;
    const pus = await s.deps.sql<{ id: string }[]>`
      INSERT INTO platform_users (app_id, user_id, platform, external_id) VALUES
        (${app.appId}, ${user.id}, 'TELEGRAM', '1'), (${app.appId}, ${user.id}, 'SLACK', 'U1'), (${app.appId}, NULL, 'TELEGRAM', '2')
      RETURNING id`;
    const [pu1, pu2, other] = pus.map((p) => p.id);
    const conv = randomUUID();
    const edge = (id: string) => [{ edge_type: 'sent_by', target_node_type: 'platform_user' as const, target_node_id: id }];
    const [marker] = await commit(s.deps, app.appId, [{ event_type: 'marker' }]);
    const markerCursor = (await s.request('GET', `/v1/events/${marker}`, { auth: app })).json.cursor;

    // Every combination of type / conversation / user, so each filter has something to exclude.
    const batch = (tag: string): EventSpec[] => {
      const out: EventSpec[] = [];
      for (const type of ['order.placed', 'order.paid', 'ping', 'other.x'])
        for (const c of [conv, null])
          for (const u of [pu1, pu2, other, null])
            out.push({ event_type: type, conversation_id: c, edges: u ? edge(u) : [], payload: { tag, type, c, u } });
      return out;
    };
    const historic = await commit(s.deps, app.appId, batch('historic'));

    const cases: { q: string; want: (p: { type: string; c: string | null; u: string | null }) => boolean }[] = [
      { q: 'eventTypes=order.*,ping', want: (p) => p.type.startsWith('order.') || p.type === 'ping' },
      { q: `conversationId=${conv}`, want: (p) => p.c === conv },
      { q: `userId=${user.id}`, want: (p) => p.u === pu1 || p.u === pu2 },
      { q: `userId=${pu2}`, want: (p) => p.u === pu2 },
      {
        q: `eventTypes=order.paid&conversationId=${conv}&userId=${user.id.toUpperCase()}`,
        want: (p) => p.type === 'order.paid' && p.c === conv && (p.u === pu1 || p.u === pu2),
      },
    ];
    const all = [...historic];
    const payloads = new Map<string, { type: string; c: string | null; u: string | null }>();
    for (const [i, spec] of batch('historic').entries()) payloads.set(historic[i], spec.payload as never);

    const clients = await Promise.all(cases.map((k) => stream(s.base, app, `?${k.q}`, { headers: { 'Last-Event-ID': markerCursor } })));
    const live = await commit(s.deps, app.appId, batch('live'));
    for (const [i, spec] of batch('live').entries()) payloads.set(live[i], spec.payload as never);
    all.push(...live);
    // A sentinel every filter matches: once it arrives, nothing else can still be on its way.
    const [sentinel] = await commit(s.deps, app.appId, [
      { event_type: 'order.paid', conversation_id: conv, edges: [...edge(pu1), ...edge(pu2)] },
    ]);

    for (const [i, k] of cases.entries()) {
      const want = all.filter((id) => k.want(payloads.get(id)!));
      expect(want.length).toBeGreaterThan(0);
      const got = await take(clients[i], want.length + 1);
      expect(
        got.map((f) => parse(f).id),
        k.q,
      ).toEqual([...want, sentinel]);
      clients[i].close();
    }
  });

  it('follows identity: a merged-away userId resolves to its survivor, and a stream open across a merge keeps following the person', async () => {
    const app = await s.createApp();
    const [ua, ub] = await s.deps.sql<
      { id: string }[]
    >`INSERT INTO users (app_id, name) VALUES (${app.appId}, 'A'), (${app.appId}, 'B') RETURNING id`;
    const [[a1], [b1]] = await Promise.all([
      s.deps.sql<
        { id: string }[]
      >`INSERT INTO platform_users (app_id, user_id, platform, external_id) VALUES (${app.appId}, ${ua.id}, 'TELEGRAM', 'a1') RETURNING id`,
      s.deps.sql<
        { id: string }[]
      >`INSERT INTO platform_users (app_id, user_id, platform, external_id) VALUES (${app.appId}, ${ub.id}, 'TELEGRAM', 'b1') RETURNING id`,
    ]);
    const edge = (id: string) => [{ edge_type: 'sent_by', target_node_type: 'platform_user' as const, target_node_id: id }];
    const [marker] = await commit(s.deps, app.appId, [{ event_type: 'marker' }]);
    const markerCursor = (await s.request('GET', `/v1/events/${marker}`, { auth: app })).json.cursor;
    const open = (q: string) => stream(s.base, app, q, { headers: { 'Last-Event-ID': markerCursor } });
    const followsA = await open(`?userId=${ua.id}`);
    const followsAOrders = await open(`?userId=${ua.id}&eventTypes=order.*`);

    const [e1, e2] = await commit(s.deps, app.appId, [
      { event_type: 'order.a', edges: edge(a1.id) },
      { event_type: 'order.b', edges: edge(b1.id) },
    ]);
    const merged = await mergeUsers(s.deps, app.appId, { targetUserId: ub.id, sourceUserId: ua.id });
    if (!merged.ok) throw new Error(merged.error.message);
    // This stack runs no ledger worker: commit the merge's event the way the worker would.
    const mergeEvent = mergedEvent(merged.value);
    await commit(s.deps, app.appId, [mergeEvent]);
    const [e3, e4] = await commit(s.deps, app.appId, [
      { event_type: 'order.b2', edges: edge(b1.id) },
      { event_type: 'order.a2', edges: edge(a1.id) },
    ]);

    expect((await take(followsA, 4)).map((f) => parse(f).id)).toEqual([e1, mergeEvent.id, e3, e4]);
    expect((await take(followsAOrders, 3)).map((f) => parse(f).id)).toEqual([e1, e3, e4]);
    // Opened after the merge, the merged-away id stands for the survivor over the whole history.
    const later = await open(`?userId=${ua.id}`);
    expect((await take(later, 5)).map((f) => parse(f).id)).toEqual([e1, e2, mergeEvent.id, e3, e4]);
    for (const c of [followsA, followsAOrders, later]) c.close();
  });

  it('answers bad input with a JSON 400 and never opens a stream', async () => {
    const bad = [
      ['', { 'Last-Event-ID': 'not-a-cursor' }, 'INVALID_CURSOR'],
      ['?lastEventId=%25%25', {}, 'INVALID_CURSOR'],
      ['?eventTypes=Order%20Placed', {}, 'VALIDATION_ERROR'],
      ['?userId=42', {}, 'VALIDATION_ERROR'],
      ['?conversationId=nope', {}, 'VALIDATION_ERROR'],
    ] as const;
    for (const [q, headers, code] of bad) {
      const c = await stream(s.base, a, q, { headers });
      expect(c.status, q).toBe(400);
      expect(c.headers.get('content-type')).toMatch(/application\/json/);
      expect(JSON.parse(c.text!).error.code).toBe(code);
    }
  });

  it('answers auth failures as plain JSON 401/403, and needs no X-Service-App-ID', async () => {
    const none = await stream(s.base, undefined);
    expect(none.status).toBe(401);
    expect(none.headers.get('content-type')).toMatch(/application\/json/);
    expect(JSON.parse(none.text!).error.code).toBe('UNAUTHORIZED');

    const wrong = await stream(s.base, a, '', { headers: { 'X-Service-App-ID': b.appId } });
    expect(wrong.status).toBe(401);

    const bogus = await stream(s.base, { ...a, apiKey: 'gw_nope' });
    expect(bogus.status).toBe(401);

    const writer = await s.createKey(a.appId, ['events:write']);
    const forbidden = await stream(s.base, writer);
    expect(forbidden.status).toBe(403);
    expect(JSON.parse(forbidden.text!).error.code).toBe('FORBIDDEN');

    const noHeader = await stream(s.base, a, '', { appHeader: false });
    expect(noHeader.status).toBe(200);
    noHeader.close();
  });

  it('delivers an event whose wake was lost, within the re-check interval', async () => {
    const c = await stream(s.base, a, `?lastEventId=${await cursorOf(a.appId, (await commit(s.deps, a.appId, [{}]))[0])}`);
    const [silent] = await commit(s.deps, a.appId, [{ event_type: 'no.wake' }], { wake: false });
    const t0 = Date.now();
    const [f] = await take(c, 1, 5000);
    expect(parse(f).id).toBe(silent);
    expect(Date.now() - t0).toBeLessThan(2000);
    c.close();
  });

  it('turns duplicate, stale and bogus wakes into neither duplicates nor reordering', async () => {
    const [start] = await commit(s.deps, a.appId, [{}]);
    const c = await stream(s.base, a, `?lastEventId=${await cursorOf(a.appId, start)}`);
    const channel = `${s.config.REDIS_PREFIX}:wake:${a.appId}`;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(...(await commit(s.deps, a.appId, [{ payload: { i } }, { payload: { i, j: 1 } }])));
      for (const msg of ['1', '999999999', 'garbage', '']) await s.deps.redis.publish(channel, msg);
    }
    const [sentinel] = await commit(s.deps, a.appId, [{ event_type: 'sentinel' }]);
    const got = await take(c, ids.length + 1);
    expect(got.map((f) => parse(f).id)).toEqual([...ids, sentinel]);
    c.close();
  });
});

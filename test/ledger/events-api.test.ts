import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { closeDeps, createDeps } from '../../src/deps.js';
import { createChangeStamps } from '../../src/change-stamps.js';
import { checkPayload, createEventSchema, deleteEventSchema, updateEventSchema } from '../../src/ledger/event-schemas.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;

beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger'] });
  a = await s.createApp();
  b = await s.createApp();
});
afterAll(() => s.close());

const post = (auth: AppCredentials, body: unknown, headers: Record<string, string> = {}) =>
  s.request('POST', '/v1/events', { auth, body, headers });

describe('POST /v1/events', () => {
  it('answers 201 with the stored event in REST names once committed', async () => {
    const r = await post(a, { event_type: 'order.placed', payload: { total: 12 } });
    expect(r.status).toBe(201);
    expect(r.json).toMatchObject({ app_id: a.appId, event_type: 'order.placed', payload: { total: 12 }, edges: [], origin_event_id: null });
    expect(r.json.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    const read = await s.request('GET', `/v1/events/${r.json.id}`, { auth: a });
    expect(read.json).toEqual(r.json);
  });

  it('rejects reserved prefixes with RESERVED_EVENT_TYPE and writes nothing', async () => {
    for (const t of ['message.inbound', 'user.merged', 'system.x', 'link_code.generated']) {
      const r = await post(a, { event_type: t, payload: {} });
      expect(r.status).toBe(400);
      expect(r.json.error.code).toBe('RESERVED_EVENT_TYPE');
    }
    const [{ n }] = await s.deps.sql<
      { n: number }[]
    >`SELECT count(*)::int AS n FROM events WHERE event_type LIKE 'message.%' OR event_type LIKE 'user.%'`;
    expect(n).toBe(0);
  });

  it('rejects bad names and non-object payloads with VALIDATION_ERROR details', async () => {
    const r1 = await post(a, { event_type: 'Order Placed', payload: {} });
    expect(r1.status).toBe(400);
    expect(r1.json.error.code).toBe('VALIDATION_ERROR');
    expect(r1.json.error.details[0].path).toEqual(['event_type']);
    const r2 = await post(a, { event_type: 'ok', payload: [1, 2] });
    expect(r2.json.error.details[0].path).toEqual(['payload']);
  });

  it('names an edge target or origin that does not exist in the application', async () => {
    const [pu] = await s.deps.sql<
      { id: string }[]
    >`INSERT INTO platform_users (app_id, platform, external_id) VALUES (${b.appId}, 'TELEGRAM', '42') RETURNING id`;
    const foreign = (await post(b, { event_type: 'b.thing', payload: {} })).json.id;
    const r = await post(a, {
      event_type: 'order.linked',
      payload: {},
      edges: [{ edge_type: 'placed_by', target_node_type: 'platform_user', target_node_id: pu.id }],
      origin_event_id: foreign,
    });
    expect(r.status).toBe(400);
    expect(r.json.error.details.map((d: { path: unknown[] }) => d.path)).toEqual([['edges', 0, 'target_node_id'], ['origin_event_id']]);
  });

  it('stores edges and the origin link when they belong to the application', async () => {
    const [pu] = await s.deps.sql<
      { id: string }[]
    >`INSERT INTO platform_users (app_id, platform, external_id, name) VALUES (${a.appId}, 'TELEGRAM', '7', 'Ann') RETURNING id`;
    const origin = (await post(a, { event_type: 'order.placed', payload: {} })).json;
    const r = await post(a, {
      event_type: 'order.shipped',
      payload: {},
      edges: [{ edge_type: 'placed_by', target_node_type: 'platform_user', target_node_id: pu.id }],
      origin_event_id: origin.id,
    });
    expect(r.status).toBe(201);
    expect(r.json.edges).toEqual([{ edge_type: 'placed_by', target_node_type: 'platform_user', target_node_id: pu.id }]);
    expect(r.json.origin_event_id).toBe(origin.id);
    // The 201 is the stored event, field for field.
    expect((await s.request('GET', `/v1/events/${r.json.id}`, { auth: a })).json).toEqual(r.json);
    const fields = `id eventType payload createdAt originEvent { id eventType } edges { edgeType targetNodeType targetNodeId targetPlatformUser { externalId name } }`;
    const g = await s.gql(a, `query($id: ID!) { event(id: $id) { ${fields} } }`, { id: r.json.id });
    expect(g.json.data.event).toMatchObject({
      originEvent: { id: origin.id, eventType: 'order.placed' },
      edges: [{ edgeType: 'placed_by', targetNodeType: 'PLATFORM_USER', targetPlatformUser: { externalId: '7', name: 'Ann' } }],
    });
    const created = await s.gql(
      a,
      `mutation($e: [EdgeInput!], $o: ID) { createEvent(eventType: "order.shipped", payload: {n: 1}, edges: $e, originEventId: $o) { ${fields} } }`,
      {
        e: [{ edgeType: 'placed_by', targetNodeType: 'PLATFORM_USER', targetNodeId: pu.id }],
        o: origin.id,
      },
    );
    expect(created.json.errors).toBeUndefined();
    const stored = await s.gql(a, `query($id: ID!) { event(id: $id) { ${fields} } }`, { id: created.json.data.createEvent.id });
    expect(created.json.data.createEvent).toEqual(stored.json.data.event);
    expect(created.json.data.createEvent.edges[0].targetPlatformUser).toEqual({ externalId: '7', name: 'Ann' });
  });

  it('replays the same event for a repeated Idempotency-Key and refuses another body', async () => {
    const key = { 'Idempotency-Key': 'abc-1' };
    const first = await post(a, { event_type: 'pay.once', payload: { n: 1 } }, key);
    const again = await post(a, { payload: { n: 1 }, event_type: 'pay.once' }, key);
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.json).toEqual(first.json);
    const conflict = await post(a, { event_type: 'pay.once', payload: { n: 2 } }, key);
    expect(conflict.status).toBe(409);
    expect(conflict.json.error.code).toBe('IDEMPOTENCY_CONFLICT');
    const [{ n }] = await s.deps.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE event_type = 'pay.once'`;
    expect(n).toBe(1);
    // The same key in another application is another key.
    expect((await post(b, { event_type: 'pay.once', payload: { n: 2 } }, key)).status).toBe(201);
  });
});

describe('event schemas', () => {
  it('rejects an enforced mismatch with payload paths, applies defaults, and keeps errors when not enforced', async () => {
    const schema = {
      type: 'object',
      required: ['amount'],
      properties: { amount: { type: 'number', minimum: 0 }, currency: { type: 'string', default: 'EUR' } },
    };
    const c = await s.request('POST', '/v1/event-schemas', {
      auth: a,
      body: { name: 'invoice.paid', json_schema: schema, enforce_validation: true },
    });
    expect(c.status).toBe(201);
    const bad = await post(a, { event_type: 'invoice.paid', payload: { amount: -1 } });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('VALIDATION_ERROR');
    expect(bad.json.error.details[0].path).toEqual(['payload', 'amount']);
    const good = await post(a, { event_type: 'invoice.paid', payload: { amount: 3 } });
    expect(good.json.payload).toEqual({ amount: 3, currency: 'EUR' });
    expect((await s.request('GET', `/v1/events/${good.json.id}`, { auth: a })).json).toEqual(good.json);

    const g = await s.gql(a, `mutation { createEvent(eventType: "invoice.paid", payload: {currency: "USD"}) { id } }`);
    expect(g.json.errors[0].extensions.code).toBe('VALIDATION_ERROR');
    expect(g.json.errors[0].extensions.path).toEqual(['payload', 'amount']);
    expect(g.json.errors[0].message).toMatch(/amount is required/);

    const off = await s.request('PATCH', `/v1/event-schemas/${c.json.id}`, { auth: a, body: { enforce_validation: false } });
    expect(off.json.enforce_validation).toBe(false);
    const kept = await post(a, { event_type: 'invoice.paid', payload: { amount: 'x' } });
    expect(kept.status).toBe(201);
    expect(kept.json.validation_errors[0].path).toEqual(['payload', 'amount']);
    expect((await s.request('GET', `/v1/events/${kept.json.id}`, { auth: a })).json).toEqual(kept.json);
  });

  it('lookups cached per process see a schema created, changed and deleted in another process on the very next check', async () => {
    // A second Deps is a second process's worth of caches over the same database and Redis.
    const one = s.deps;
    const two = createDeps(s.config);
    try {
      const app = await createApplication(one.sql, 'schema-cache', ['admin']);
      const stamps = createChangeStamps(two.sql);
      const check = () => checkPayload(two.sql, stamps, app.appId, 'order.paid', { note: 'no amount' });
      // "No schema" is cached too, and must not outlive the schema's creation.
      for (let i = 0; i < 2; i++) expect(await check()).toMatchObject({ errors: null, enforced: false });

      const created = await createEventSchema(one.sql, app.appId, {
        name: 'order.paid',
        json_schema: { type: 'object', required: ['amount'] },
        enforce_validation: true,
      });
      if (!created.ok) throw new Error(created.error.message);
      const enforced = await check();
      expect(enforced.enforced).toBe(true);
      expect(enforced.errors?.[0].path).toEqual(['payload', 'amount']);

      expect((await updateEventSchema(one.sql, app.appId, created.value.id, { enforce_validation: false })).ok).toBe(true);
      expect(await check()).toMatchObject({ enforced: false, errors: [expect.objectContaining({ path: ['payload', 'amount'] })] });

      expect((await deleteEventSchema(one.sql, app.appId, created.value.id)).ok).toBe(true);
      expect(await check()).toMatchObject({ errors: null, enforced: false });
    } finally {
      await closeDeps(two);
    }
  });

  it('refuses an invalid JSON Schema, a duplicate name, and other applications', async () => {
    const bad = await s.request('POST', '/v1/event-schemas', { auth: a, body: { name: 'x.y', json_schema: { type: 'nonsense' } } });
    expect(bad.status).toBe(400);
    expect(bad.json.error.details[0].path).toEqual(['json_schema']);
    const ok = await s.request('POST', '/v1/event-schemas', { auth: a, body: { name: 'x.z', json_schema: { type: 'object' } } });
    const dup = await s.request('POST', '/v1/event-schemas', { auth: a, body: { name: 'x.z', json_schema: { type: 'object' } } });
    expect(dup.status).toBe(409);
    const got = await s.request('GET', `/v1/event-schemas/${ok.json.id}`, { auth: a });
    expect(got.json).toMatchObject({ id: ok.json.id, name: 'x.z', json_schema: { type: 'object' }, enforce_validation: false });
    expect((await s.request('GET', `/v1/event-schemas/${ok.json.id}`, { auth: b })).status).toBe(404);
    expect((await s.request('DELETE', `/v1/event-schemas/${ok.json.id}`, { auth: b })).status).toBe(404);
    expect((await s.request('DELETE', `/v1/event-schemas/${ok.json.id}`, { auth: a })).status).toBe(204);
    const readOnly = await s.createKey(a.appId, ['events:read', 'events:write']);
    expect((await s.request('GET', '/v1/event-schemas', { auth: readOnly })).status).toBe(403);
  });
});

describe('GET /v1/events', () => {
  it('pages in cursor order and keeps polling from next_cursor without repeats', async () => {
    const app = await s.createApp();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await post(app, { event_type: i % 2 ? 'odd.one' : 'even.one', payload: { i } })).json.id);
    const p1 = await s.request('GET', '/v1/events?limit=2', { auth: app });
    expect(p1.json.data.map((e: { id: string }) => e.id)).toEqual(ids.slice(0, 2));
    expect(p1.json.has_more).toBe(true);
    const p2 = await s.request('GET', `/v1/events?limit=10&after=${p1.json.next_cursor}`, { auth: app });
    expect(p2.json.data.map((e: { id: string }) => e.id)).toEqual(ids.slice(2));
    expect(p2.json.has_more).toBe(false);
    const empty = await s.request('GET', `/v1/events?after=${p2.json.next_cursor}`, { auth: app });
    expect(empty.json).toEqual({ data: [], has_more: false });
    const later = (await post(app, { event_type: 'even.one', payload: {} })).json.id;
    const p3 = await s.request('GET', `/v1/events?after=${p2.json.next_cursor}`, { auth: app });
    expect(p3.json.data.map((e: { id: string }) => e.id)).toEqual([later]);
    const odd = await s.request('GET', '/v1/events?event_type=odd.*', { auth: app });
    expect(odd.json.data.map((e: { id: string }) => e.id)).toEqual([ids[1], ids[3]]);
    const exact = await s.request('GET', '/v1/events?event_type=even.one', { auth: app });
    expect(exact.json.data).toHaveLength(4);
  });

  it('pages back newest first with order=desc, and filters by user and conversation', async () => {
    const app = await s.createApp();
    const [pu] = await s.deps.sql<{ id: string; user_id: string }[]>`
      INSERT INTO platform_users (app_id, platform, external_id, name) VALUES (${app.appId}, 'TELEGRAM', '777', 'Ann') RETURNING id, user_id`;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const edges = i % 2 ? [{ edge_type: 'customer', target_node_type: 'platform_user', target_node_id: pu.id }] : [];
      ids.push((await post(app, { event_type: 'back.one', payload: { i }, edges })).json.id);
    }
    const newest = await s.request('GET', '/v1/events?order=desc&limit=2', { auth: app });
    expect(newest.json.data.map((e: { id: string }) => e.id)).toEqual([ids[4], ids[3]]);
    expect(newest.json.has_more).toBe(true);
    const older = await s.request('GET', `/v1/events?order=desc&limit=10&before=${newest.json.next_cursor}`, { auth: app });
    expect(older.json.data.map((e: { id: string }) => e.id)).toEqual([ids[2], ids[1], ids[0]]);
    expect(older.json.has_more).toBe(false);
    const between = await s.request('GET', `/v1/events?after=${older.json.data[2].cursor}&before=${newest.json.data[1].cursor}`, {
      auth: app,
    });
    expect(between.json.data.map((e: { id: string }) => e.id)).toEqual([ids[1], ids[2]]);

    for (const who of [pu.id, pu.user_id]) {
      const mine = await s.request('GET', `/v1/events?user_id=${who}`, { auth: app });
      expect(mine.json.data.map((e: { id: string }) => e.id)).toEqual([ids[1], ids[3]]);
    }
    const elsewhere = await s.request('GET', `/v1/events?conversation_id=${pu.id}`, { auth: app });
    expect(elsewhere.json.data).toEqual([]);
  });

  it('answers 400 for a malformed cursor or limit', async () => {
    for (const q of [
      'after=not-a-cursor',
      `after=${Buffer.from('v1|x|y|z').toString('base64url')}`,
      'limit=0',
      'limit=501',
      'event_type=BAD',
      'order=sideways',
      'before=not-a-cursor',
    ]) {
      const r = await s.request('GET', `/v1/events?${q}`, { auth: a });
      expect(r.status, q).toBe(400);
      expect(['INVALID_CURSOR', 'VALIDATION_ERROR']).toContain(r.json.error.code);
    }
  });

  it("never shows one application another application's events", async () => {
    const mine = (await post(b, { event_type: 'secret.b', payload: { x: 1 } })).json;
    const list = await s.request('GET', '/v1/events?limit=500', { auth: a });
    expect(list.json.data.some((e: { id: string }) => e.id === mine.id)).toBe(false);
    expect((await s.request('GET', `/v1/events/${mine.id}`, { auth: a })).status).toBe(404);
    const g = await s.gql(a, `{ events(first: 500, filters: {eventType: {equals: "secret.b"}}) { edges { node { id } } } }`);
    expect(g.json.data.events.edges).toEqual([]);
    const viaCursor = await s.request('GET', `/v1/events?after=${mine.cursor}`, { auth: a });
    expect(viaCursor.json.data.every((e: { app_id: string }) => e.app_id === a.appId)).toBe(true);
  });
});

describe('GraphQL events', () => {
  it('filters by type, payload comparison and edge, combined with AND, in ledger order', async () => {
    const app = await s.createApp();
    const [pu] = await s.deps.sql<
      { id: string }[]
    >`INSERT INTO platform_users (app_id, platform, external_id) VALUES (${app.appId}, 'SLACK', 'U1') RETURNING id`;
    const edge = [{ edge_type: 'buyer', target_node_type: 'platform_user', target_node_id: pu.id }];
    const e1 = (await post(app, { event_type: 'shop.order', payload: { total: 5 }, edges: edge })).json;
    const e2 = (await post(app, { event_type: 'shop.order', payload: { total: 50 }, edges: edge })).json;
    await post(app, { event_type: 'shop.order', payload: { total: 80 } });
    await post(app, { event_type: 'shop.refund', payload: { total: 90 }, edges: edge });
    const q = `query($f: EventFilters) { events(filters: $f, first: 10) { edges { node { id } } pageInfo { hasNextPage endCursor } } }`;
    const ids = async (f: unknown) => (await s.gql(app, q, { f })).json.data.events.edges.map((x: { node: { id: string } }) => x.node.id);
    expect(await ids({ eventType: { equals: 'shop.order' }, hasEdge: { edgeType: 'buyer', targetNodeId: { equals: pu.id } } })).toEqual([
      e1.id,
      e2.id,
    ]);
    expect(
      await ids({ eventType: { startsWith: 'shop.' }, payload: { path: 'total', gte: 50 }, hasEdge: { targetNodeId: { equals: pu.id } } }),
    ).toHaveLength(2);
    expect(await ids({ payload: { path: 'total', lt: 10 } })).toEqual([e1.id]);
    const page = await s.gql(app, `{ events(first: 1) { pageInfo { hasNextPage endCursor } } }`);
    expect(page.json.data.events.pageInfo.hasNextPage).toBe(true);
    const next = await s.gql(app, `query($c: String) { events(first: 1, after: $c) { edges { node { id } } } }`, {
      c: page.json.data.events.pageInfo.endCursor,
    });
    expect(next.json.data.events.edges[0].node.id).toBe(e2.id);
  });

  it('bounds first, rejects malformed cursors and over-deep queries, and checks scopes', async () => {
    expect((await s.gql(a, `{ events(first: 501) { edges { cursor } } }`)).json.errors[0].extensions.code).toBe('VALIDATION_ERROR');
    expect((await s.gql(a, `{ events(after: "nope") { edges { cursor } } }`)).json.errors[0].extensions.code).toBe('INVALID_CURSOR');
    const deep = `{ events { edges { node { originEvent { originEvent { originEvent { originEvent { originEvent { originEvent { originEvent { id } } } } } } } } } } }`;
    const d = await s.gql(a, deep);
    expect(d.json.data).toBeUndefined();
    expect(d.json.errors[0].message).toMatch(/depth/);
    const reader = await s.createKey(a.appId, ['events:read']);
    const w = await s.gql(reader, `mutation { createEvent(eventType: "x.y", payload: {}) { id } }`);
    expect(w.json.errors[0].extensions.code).toBe('FORBIDDEN');
    const sch = await s.gql(reader, `mutation { createEventSchema(name: "x.y", jsonSchema: {}) { id } }`);
    expect(sch.json.errors[0].extensions.code).toBe('FORBIDDEN');
    const r = await s.gql(a, `mutation { createEvent(eventType: "system.x") { id } }`);
    expect(r.json.errors[0].extensions.code).toBe('RESERVED_EVENT_TYPE');
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertPlatformUser } from '../../src/identity/platform-users.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { eventsOfType, eventually, receive, seedConnection, type Conn } from './fixtures.js';

let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;
let tg: Conn;
let wa: Conn;
let seq = 0;

beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger'], env: { RATE_LIMIT_PER_MINUTE: '100000' } });
  a = await s.createApp();
  b = await s.createApp();
  tg = { appId: a.appId, id: await seedConnection(s, a.appId, 'TELEGRAM'), platform: 'TELEGRAM' };
  wa = { appId: a.appId, id: await seedConnection(s, a.appId, 'WHATSAPP'), platform: 'WHATSAPP' };
});
afterAll(() => s.close());

const merge = (target: string, source: string, auth: AppCredentials = a) =>
  s.request('POST', `/v1/users/${target}/merge`, { auth, body: { source_user_id: source } });
const get = (path: string, auth: AppCredentials = a) => s.request('GET', path, { auth });
/** A fresh user with one platform user (and one inbound message) on the given connection. */
const person = async (conn: Conn, name: string) =>
  receive(s, conn, { from: `${conn.platform === 'WHATSAPP' ? '49' : ''}${++seq}${Date.now() % 100000}`, name, text: `hello from ${name}` });

describe('POST /v1/users/:id/merge', () => {
  it("moves the source's platform users to the target, records user.merged, and the source is gone", async () => {
    const t = await person(tg, 'Tina');
    const src = await person(wa, 'Tina on WhatsApp');
    await s.request('PATCH', `/v1/users/${src.userId}`, { auth: a, body: { metadata: { phone_verified: true, tier: 'basic' } } });
    await s.request('PATCH', `/v1/users/${t.userId}`, { auth: a, body: { metadata: { tier: 'gold' } } });

    const r = await merge(t.userId, src.userId);
    expect(r.status).toBe(200);
    expect(r.json.merge).toMatchObject({
      target_user_id: t.userId,
      source_user_id: src.userId,
      platform_user_ids: [src.platformUserId],
      replayed: false,
    });
    expect(r.json.user.platform_users.map((p: { id: string }) => p.id).sort()).toEqual([t.platformUserId, src.platformUserId].sort());
    // The target keeps its own keys and gains the ones it lacked.
    expect(r.json.user.metadata).toEqual({ tier: 'gold', phone_verified: true });
    expect(r.json.user.name).toBe('Tina');

    const gone = await get(`/v1/users/${src.userId}`);
    expect(gone.status).toBe(410);
    expect(gone.json.error.code).toBe('USER_MERGED');
    expect(gone.json.error.details[0].merged_into).toBe(t.userId);
    expect(gone.headers.get('location')).toBe(`/v1/users/${t.userId}`);
    expect((await s.request('PATCH', `/v1/users/${src.userId}`, { auth: a, body: { name: 'x' } })).status).toBe(410);
    const gql = await s.gql(a, `query($id: ID!) { user(id: $id) { id } }`, { id: src.userId });
    expect(gql.json.errors[0].extensions).toMatchObject({
      code: 'USER_MERGED',
      details: [expect.objectContaining({ merged_into: t.userId })],
    });

    const listed = (await get('/v1/users?limit=200')).json.data.map((u: { id: string }) => u.id);
    expect(listed).toContain(t.userId);
    expect(listed).not.toContain(src.userId);

    await eventually(
      async () => (await eventsOfType(s, a.appId, 'user.merged')).some((e) => e.id === r.json.merge.event_id),
      'user.merged',
    );
    const ev = (await get(`/v1/events/${r.json.merge.event_id}`)).json;
    expect(ev.payload).toEqual({ target_user_id: t.userId, source_user_id: src.userId, platform_user_ids: [src.platformUserId] });
    expect(ev.edges).toEqual([
      { edge_type: 'merged_platform_user', target_node_type: 'platform_user', target_node_id: src.platformUserId },
    ]);
  });

  it('answers a repeated merge with the recorded one and records a single event', async () => {
    const t = await person(tg, 'Rita');
    const src = await person(wa, 'Rita WA');
    const first = await merge(t.userId, src.userId);
    const again = await merge(t.userId, src.userId);
    expect(again.status).toBe(200);
    expect(again.json.merge).toEqual({ ...first.json.merge, replayed: true });
    await eventually(
      async () => (await eventsOfType(s, a.appId, 'user.merged')).some((e) => e.id === first.json.merge.event_id),
      'user.merged',
    );
    const mine = (await eventsOfType(s, a.appId, 'user.merged')).filter((e) => e.payload.source_user_id === src.userId);
    expect(mine).toHaveLength(1);
  });

  it('refuses merging back, into itself, unknown, foreign and system users — writing nothing', async () => {
    const t = await person(tg, 'Uma');
    const src = await person(wa, 'Uma WA');
    await merge(t.userId, src.userId);
    const back = await merge(src.userId, t.userId);
    expect(back.status).toBe(410);
    expect(back.json.error).toMatchObject({ code: 'USER_MERGED', details: [expect.objectContaining({ merged_into: t.userId })] });

    const self = await merge(t.userId, t.userId);
    expect(self.status).toBe(400);
    expect(self.json.error.code).toBe('VALIDATION_ERROR');
    expect((await merge(t.userId, '00000000-0000-4000-8000-000000000000')).json.error).toMatchObject({
      code: 'NOT_FOUND',
      details: [expect.objectContaining({ path: ['source_user_id'] })],
    });
    expect((await merge(t.userId, 'nope')).status).toBe(404);

    const other = await person(tg, 'Other');
    expect((await merge(t.userId, other.userId, b)).status).toBe(404);
    expect((await get(`/v1/users/${other.userId}`)).status).toBe(200);

    const bot = await upsertPlatformUser(s.deps.sql, {
      appId: a.appId,
      connectionId: tg.id,
      platform: 'TELEGRAM',
      externalId: 'bot',
      isSystem: true,
    });
    const sys = await merge(t.userId, bot.user_id);
    expect(sys.status).toBe(409);
    expect(sys.json.error.code).toBe('CONFLICT');
    const [{ n }] = await s.deps.sql<
      { n: number }[]
    >`SELECT count(*)::int AS n FROM users WHERE id = ${bot.user_id} AND merged_into IS NULL`;
    expect(n).toBe(1);
  });

  it('points a user merged twice over at the final survivor', async () => {
    const x = await person(tg, 'X');
    const y = await person(tg, 'Y');
    const z = await person(wa, 'Z');
    expect((await merge(y.userId, x.userId)).status).toBe(200);
    expect((await merge(z.userId, y.userId)).status).toBe(200);
    const r = await get(`/v1/users/${x.userId}`);
    expect(r.status).toBe(410);
    expect(r.json.error.details[0].merged_into).toBe(z.userId);
    expect((await get(`/v1/users/${z.userId}`)).json.platform_users).toHaveLength(3);
  });
});

describe('filters follow identity across a merge', () => {
  it('platform/external_id filters, hasEdge on a user, the user event listing and conversations all resolve through the merge', async () => {
    const t = await person(tg, 'Fiona');
    const src = await person(wa, 'Fiona WA');
    const waExternal = (await get(`/v1/users/${src.userId}`)).json.platform_users[0].external_id;
    const hasEdge = (id: string) =>
      s.gql(
        a,
        `query($id: ID!) { events(filters: { hasEdge: { edgeType: "sent_by", targetNodeId: { equals: $id } } }) { edges { node { id } } } }`,
        { id },
      );
    const ids = (r: { json: any }) => r.json.data.events.edges.map((e: { node: { id: string } }) => e.node.id);
    const userEvents = async (id: string) =>
      (await get(`/v1/users/${id}/events?event_type=message.*`)).json.data.map((e: { id: string }) => e.id);
    const userConversations = async (id: string) =>
      (await get(`/v1/conversations?user_id=${id}`)).json.data.map((c: { id: string }) => c.id);

    // Before: each user has its own message and conversation.
    expect(ids(await hasEdge(t.userId))).toEqual([t.eventId]);
    expect(ids(await hasEdge(src.userId))).toEqual([src.eventId]);
    expect(await userEvents(t.userId)).toEqual([t.eventId]);
    expect(await userEvents(src.userId)).toEqual([src.eventId]);
    await eventually(async () => (await userConversations(src.userId)).length === 1, 'participants');
    expect((await get(`/v1/users?platform=whatsapp&external_id=${waExternal}`)).json.data.map((u: { id: string }) => u.id)).toEqual([
      src.userId,
    ]);

    await merge(t.userId, src.userId);
    const later = await receive(s, wa, { from: waExternal, text: 'after the merge' });
    expect(later.userId).toBe(t.userId);

    // After: the survivor has everything, and the merged-away id resolves to the survivor.
    const both = [t.eventId, src.eventId, later.eventId];
    expect(ids(await hasEdge(t.userId))).toEqual(both);
    expect(ids(await hasEdge(src.userId))).toEqual(both);
    expect(await userEvents(t.userId)).toEqual(both);
    expect(await userEvents(src.userId)).toEqual(both);
    // A platform user's own id still matches only its own edges.
    expect(ids(await hasEdge(src.platformUserId))).toEqual([src.eventId, later.eventId]);
    await eventually(async () => (await userConversations(t.userId)).length === 2, 'conversations of the survivor');
    expect((await userConversations(src.userId)).sort()).toEqual((await userConversations(t.userId)).sort());
    expect((await get(`/v1/users?platform=whatsapp&external_id=${waExternal}`)).json.data.map((u: { id: string }) => u.id)).toEqual([
      t.userId,
    ]);
    // The merge event itself is in the survivor's listing.
    const all = (await get(`/v1/users/${t.userId}/events`)).json.data.map((e: { event_type: string }) => e.event_type);
    await eventually(
      async () => (await get(`/v1/users/${t.userId}/events`)).json.data.some((e: { event_type: string }) => e.event_type === 'user.merged'),
      `user.merged in ${all}`,
    );
  });

  it('lists nothing of another application through a user id', async () => {
    const t = await person(tg, 'Iso');
    expect((await get(`/v1/users/${t.userId}/events`, b)).status).toBe(404);
    const g = await s.gql(
      b,
      `query($id: ID!) { events(filters: { hasEdge: { targetNodeId: { equals: $id } } }) { edges { node { id } } } }`,
      { id: t.userId },
    );
    expect(g.json.data.events.edges).toEqual([]);
    expect((await get(`/v1/conversations?user_id=${t.userId}`, b)).json.data).toEqual([]);
  });
});

describe('concurrent merges', () => {
  it('opposite merges of the same pair: exactly one wins, no cycle', async () => {
    const pairs = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => [await person(tg, `P${i}`), await person(wa, `Q${i}`)] as const),
    );
    const results = await Promise.all(pairs.flatMap(([p, q]) => [merge(p.userId, q.userId), merge(q.userId, p.userId)]));
    for (let i = 0; i < pairs.length; i++) {
      const [r1, r2] = [results[2 * i], results[2 * i + 1]];
      expect([r1.status, r2.status].sort()).toEqual([200, 410]);
    }
    for (const [p, q] of pairs) {
      const [{ live }] = await s.deps.sql<
        { live: number }[]
      >`SELECT count(*)::int AS live FROM users WHERE id IN (${p.userId}, ${q.userId}) AND merged_into IS NULL`;
      expect(live).toBe(1);
    }
  });

  it('a storm of random merges over real HTTP loses no platform user and leaves no cycle', async () => {
    const people = [];
    for (let i = 0; i < 16; i++) people.push(await person(i % 2 ? wa : tg, `Storm ${i}`));
    const users = people.map((p) => p.userId);
    // Deterministic pseudo-random pairs, both directions, many overlapping.
    let r = 7;
    const rnd = (n: number) => {
      r = (r * 48271) % 2147483647;
      return r % n;
    };
    const requests: [string, string][] = [];
    while (requests.length < 80) {
      const x = users[rnd(users.length)];
      const y = users[rnd(users.length)];
      if (x !== y) requests.push([x, y]);
    }
    const answers = await Promise.all(requests.map(([t, src]) => merge(t, src)));
    const statuses = answers.map((x) => x.status);
    expect(
      statuses.every((st) => st === 200 || st === 410),
      `statuses ${[...new Set(statuses)]}`,
    ).toBe(true);
    const performed = answers.filter((x) => x.status === 200 && !x.json.merge.replayed);
    expect(performed.length).toBeGreaterThan(0);

    // Every platform user still exists and belongs to a live user: the survivor of its first user.
    const pus = await s.deps.sql<{ id: string; user_id: string; merged_into: string | null }[]>`
      SELECT pu.id, pu.user_id, u.merged_into FROM platform_users pu JOIN users u ON u.id = pu.user_id
       WHERE pu.id = ANY(${people.map((p) => p.platformUserId)}::uuid[])`;
    expect(pus).toHaveLength(16);
    expect(pus.every((p) => p.merged_into === null)).toBe(true);
    for (const p of people) {
      const [{ survivor }] = await s.deps.sql<{ survivor: string }[]>`SELECT resolve_user_id(${a.appId}, ${p.userId}) AS survivor`;
      expect(pus.find((x) => x.id === p.platformUserId)!.user_id).toBe(survivor);
    }
    // No cycle: every tombstone's pointer chain ends at a live user; live users = 16 − merges.
    const merges = await s.deps.sql<
      { source_user_id: string }[]
    >`SELECT source_user_id FROM user_merges WHERE source_user_id = ANY(${users}::uuid[])`;
    expect(merges).toHaveLength(performed.length);
    const [{ live }] = await s.deps.sql<
      { live: number }[]
    >`SELECT count(*)::int AS live FROM users WHERE id = ANY(${users}::uuid[]) AND merged_into IS NULL`;
    expect(live).toBe(16 - merges.length);
    // Each performed merge recorded exactly one user.merged event, with what it moved.
    await eventually(async () => {
      const evs = (await eventsOfType(s, a.appId, 'user.merged')).filter((e) => users.includes(e.payload.source_user_id as string));
      return evs.length === performed.length;
    }, 'one user.merged per merge');
    const evs = (await eventsOfType(s, a.appId, 'user.merged')).filter((e) => users.includes(e.payload.source_user_id as string));
    expect(new Set(evs.map((e) => e.payload.source_user_id)).size).toBe(evs.length);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertParties, upsertPlatformUser } from '../../src/identity/platform-users.js';
import { eventually } from '../helpers/connections.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { receive, seedConnection, type Conn } from './fixtures.js';

let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;
let tg: Conn;
let wa: Conn;

beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger'] });
  a = await s.createApp();
  b = await s.createApp();
  tg = { appId: a.appId, id: await seedConnection(s, a.appId, 'TELEGRAM'), platform: 'TELEGRAM' };
  wa = { appId: a.appId, id: await seedConnection(s, a.appId, 'WHATSAPP'), platform: 'WHATSAPP' };
});
afterAll(() => s.close());

const get = (path: string, auth: AppCredentials = a) => s.request('GET', path, { auth });

describe('platform users and their users', () => {
  it('creates exactly one user with a platform user on first sight, even when first sights race', async () => {
    const seen = await Promise.all(
      Array.from({ length: 12 }, () =>
        upsertPlatformUser(s.deps.sql, { appId: a.appId, connectionId: tg.id, platform: 'TELEGRAM', externalId: '5550001', name: 'Racer' }),
      ),
    );
    expect(new Set(seen.map((p) => p.id)).size).toBe(1);
    expect(new Set(seen.map((p) => p.user_id)).size).toBe(1);
    const [{ n }] = await s.deps.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM users WHERE app_id = ${a.appId} AND name = 'Racer'`;
    expect(n).toBe(1);
  });

  it("finds a batch's recipient and conversation that a racing transaction created first, and creates the rest", async () => {
    const key = (externalId: string) => ({ appId: a.appId, connectionId: tg.id, platform: 'TELEGRAM', externalId });
    const keys = [key('5550002'), key('5550003')];
    const held = await s.deps.sql.reserve();
    try {
      // Another batch's first sight of 5550002, not committed yet: this batch's inserts of the
      // same keys wait for it, then do nothing, and must read its rows back.
      await held`BEGIN`;
      const [theirs] = await held<{ id: string; user_id: string }[]>`
        INSERT INTO platform_users (app_id, platform_connection_id, platform, external_id) VALUES (${a.appId}, ${tg.id}, 'TELEGRAM', '5550002')
        RETURNING id, user_id`;
      const [theirConversation] = await held<{ id: string }[]>`
        INSERT INTO conversations (app_id, platform_connection_id, external_id, thread_id) VALUES (${a.appId}, ${tg.id}, '5550002', '')
        RETURNING id`;
      const racing = upsertParties(s.deps.sql, keys, keys);
      await eventually(async () => {
        const [w] = await s.deps.sql<{ n: number }[]>`
          SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%pu_input%'`;
        return w.n > 0;
      });
      await held`COMMIT`;
      const found = await racing;
      expect(found.users.get(`${a.appId}/${tg.id}/5550002`)).toMatchObject({ id: theirs.id, user_id: theirs.user_id });
      expect(found.conversations.get(`${tg.id}/5550002`)).toBe(theirConversation.id);
      expect(found.users.get(`${a.appId}/${tg.id}/5550003`)?.user_id).toMatch(/^[0-9a-f-]{36}$/);
      expect(found.conversations.get(`${tg.id}/5550003`)).toMatch(/^[0-9a-f-]{36}$/);
    } finally {
      held.release();
    }
    const [counts] = await s.deps.sql<{ pu: number; users: number; conversations: number }[]>`
      SELECT (SELECT count(*)::int FROM platform_users WHERE app_id = ${a.appId} AND external_id IN ('5550002', '5550003')) AS pu,
             (SELECT count(*)::int FROM users u JOIN platform_users p ON p.user_id = u.id
               WHERE p.app_id = ${a.appId} AND p.external_id IN ('5550002', '5550003')) AS users,
             (SELECT count(*)::int FROM conversations
               WHERE platform_connection_id = ${tg.id} AND external_id IN ('5550002', '5550003')) AS conversations`;
    expect(counts).toEqual({ pu: 2, users: 2, conversations: 2 });
  });

  it('never lets a platform user exist without a user, whoever writes the row', async () => {
    const [pu] = await s.deps.sql<{ user_id: string | null }[]>`
      INSERT INTO platform_users (app_id, platform, external_id, name) VALUES (${a.appId}, 'SMS', '+15550100', 'Direct') RETURNING user_id`;
    expect(pu.user_id).toMatch(/^[0-9a-f-]{36}$/);
    await expect(s.deps.sql`UPDATE platform_users SET user_id = NULL WHERE user_id = ${pu.user_id}`).rejects.toThrow(/null value/);
  });
});

describe('GET /v1/users', () => {
  let ann: string;
  let bob: string;
  beforeAll(async () => {
    ann = (await receive(s, tg, { from: '1001', name: 'Ann Example', text: 'hi' })).userId;
    bob = (await receive(s, wa, { from: '4915112345', name: 'Bob Builder', text: 'hello' })).userId;
    for (let i = 0; i < 5; i++) await receive(s, tg, { from: `20${i}`, name: `Pager ${i}`, text: 'x' });
  });

  it('lists users with their platform users, and filters by platform, external id and name', async () => {
    const byPlatform = await get('/v1/users?platform=whatsapp');
    expect(byPlatform.status).toBe(200);
    expect(byPlatform.json.data.map((u: { id: string }) => u.id)).toEqual([bob]);
    expect(byPlatform.json.data[0].platform_users).toEqual([
      expect.objectContaining({
        platform: 'whatsapp',
        external_id: '4915112345',
        name: 'Bob Builder',
        platform_connection_id: wa.id,
        user_id: bob,
        is_system_user: false,
      }),
    ]);

    const byExternal = await get('/v1/users?platform=TELEGRAM&external_id=1001');
    expect(byExternal.json.data.map((u: { id: string }) => u.id)).toEqual([ann]);
    // platform and external_id must hold for the same platform user.
    expect((await get('/v1/users?platform=whatsapp&external_id=1001')).json.data).toEqual([]);

    const byName = await get(`/v1/users?name_contains=${encodeURIComponent('ann ex')}`);
    expect(byName.json.data.map((u: { id: string }) => u.id)).toEqual([ann]);
    // LIKE wildcards in the search are literal characters.
    expect((await get('/v1/users?name_contains=%25')).json.data).toEqual([]);
  });

  it('leaves the connected accounts (bots) out unless asked for', async () => {
    const plain = await get('/v1/users?platform=telegram&limit=200');
    expect(plain.json.data.every((u: { is_system: boolean }) => !u.is_system)).toBe(true);
    const all = await get('/v1/users?platform=telegram&limit=200&include_system=true');
    expect(all.json.data.filter((u: { is_system: boolean }) => u.is_system)).toHaveLength(1);
  });

  it('pages with an opaque cursor: every user exactly once, in creation order', async () => {
    const seen: string[] = [];
    let after: string | undefined;
    for (let guard = 0; guard < 20; guard++) {
      const r = await get(`/v1/users?limit=2${after ? `&after=${after}` : ''}`);
      expect(r.status).toBe(200);
      seen.push(...r.json.data.map((u: { id: string }) => u.id));
      if (!r.json.has_more) break;
      after = r.json.next_cursor;
    }
    const all = await get('/v1/users?limit=200');
    expect(seen).toEqual(all.json.data.map((u: { id: string }) => u.id));
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.length).toBeGreaterThanOrEqual(7);
  });

  it('refuses a malformed cursor and a cursor of another listing with INVALID_CURSOR', async () => {
    expect((await get('/v1/users?after=bogus')).json.error.code).toBe('INVALID_CURSOR');
    const conversationsCursor = (await get('/v1/conversations?limit=1')).json.next_cursor;
    expect(conversationsCursor).toBeTruthy();
    const r = await get(`/v1/users?after=${conversationsCursor}`);
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe('INVALID_CURSOR');
  });

  it('answers bad filters with VALIDATION_ERROR, not 500', async () => {
    for (const q of ['platform=myspace', 'limit=0', 'limit=abc', 'platform_connection_id=nope']) {
      const r = await get(`/v1/users?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.json.error.code).toBe('VALIDATION_ERROR');
    }
  });

  it('shows one user with platform users and conversations, and 404 for an unknown or foreign id', async () => {
    const r = await get(`/v1/users/${ann}`);
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ id: ann, name: 'Ann Example', metadata: {}, is_system: false });
    expect(r.json.platform_users).toHaveLength(1);
    expect(r.json.conversations).toEqual([
      expect.objectContaining({ platform_connection_id: tg.id, external_id: '1001', platform: 'telegram' }),
    ]);
    expect((await get(`/v1/users/00000000-0000-4000-8000-000000000000`)).json.error.code).toBe('NOT_FOUND');
    expect((await get(`/v1/users/not-a-uuid`)).status).toBe(404);
    const foreign = await get(`/v1/users/${ann}`, b);
    expect(foreign.status).toBe(404);
  });

  it('keeps applications apart in listings', async () => {
    const r = await get('/v1/users?limit=200', b);
    expect(r.status).toBe(200);
    expect(r.json.data).toEqual([]);
  });
});

describe('PATCH /v1/users/:id', () => {
  it('renames and patches metadata key by key; null deletes a key', async () => {
    const { userId } = await receive(s, tg, { from: '3001', name: 'Carol', text: 'hey' });
    const r1 = await s.request('PATCH', `/v1/users/${userId}`, {
      auth: a,
      body: { name: 'Carol C.', metadata: { tier: 'gold', crm: { id: 7 } } },
    });
    expect(r1.status).toBe(200);
    expect(r1.json).toMatchObject({ name: 'Carol C.', metadata: { tier: 'gold', crm: { id: 7 } } });
    const r2 = await s.request('PATCH', `/v1/users/${userId}`, { auth: a, body: { metadata: { tier: null, lang: 'de' } } });
    expect(r2.json.metadata).toEqual({ crm: { id: 7 }, lang: 'de' });
    expect(r2.json.name).toBe('Carol C.');
    expect(r2.json.updated_at > r1.json.created_at).toBe(true);
    const read = await get(`/v1/users/${userId}`);
    expect(read.json.metadata).toEqual({ crm: { id: 7 }, lang: 'de' });
  });

  it('refuses empty and oversized patches with VALIDATION_ERROR and changes nothing', async () => {
    const { userId } = await receive(s, tg, { from: '3002', name: 'Dan', text: 'hey' });
    for (const body of [{}, { metadata: [1] }, { name: '' }, { metadata: { big: 'x'.repeat(70_000) } }]) {
      const r = await s.request('PATCH', `/v1/users/${userId}`, { auth: a, body });
      expect(r.status, JSON.stringify(body).slice(0, 40)).toBe(400);
      expect(r.json.error.code).toBe('VALIDATION_ERROR');
    }
    expect((await get(`/v1/users/${userId}`)).json).toMatchObject({ name: 'Dan', metadata: {} });
  });

  it("cannot touch another application's user", async () => {
    const { userId } = await receive(s, tg, { from: '3003', name: 'Eve', text: 'hey' });
    const r = await s.request('PATCH', `/v1/users/${userId}`, { auth: b, body: { name: 'Mallory' } });
    expect(r.status).toBe(404);
    expect((await get(`/v1/users/${userId}`)).json.name).toBe('Eve');
  });
});

describe('scopes', () => {
  it('users:read reads but cannot write or merge; events:read alone cannot list users', async () => {
    const { userId } = await receive(s, tg, { from: '4001', name: 'Scoped', text: 'hi' });
    const other = (await receive(s, tg, { from: '4002', name: 'Other', text: 'hi' })).userId;
    const reader = await s.createKey(a.appId, ['users:read']);
    expect((await get(`/v1/users/${userId}`, reader)).status).toBe(200);
    const patch = await s.request('PATCH', `/v1/users/${userId}`, { auth: reader, body: { name: 'x' } });
    expect(patch.status).toBe(403);
    const merge = await s.request('POST', `/v1/users/${userId}/merge`, { auth: reader, body: { source_user_id: other } });
    expect(merge.status).toBe(403);
    expect(merge.json.error.code).toBe('FORBIDDEN');
    const code = await s.request('POST', '/v1/link-codes', { auth: reader, body: { user_id: userId } });
    expect(code.status).toBe(403);
    const gqlMerge = await s.gql(reader, `mutation($t: ID!, $s: ID!) { mergeUsers(targetUserId: $t, sourceUserId: $s) { eventId } }`, {
      t: userId,
      s: other,
    });
    expect(gqlMerge.json.errors[0].extensions.code).toBe('FORBIDDEN');
    const eventsOnly = await s.createKey(a.appId, ['events:read']);
    expect((await get('/v1/users', eventsOnly)).status).toBe(403);
    // Nothing was merged.
    expect((await get(`/v1/users/${other}`)).status).toBe(200);
  });
});

describe('GraphQL users', () => {
  it('lists with filters and pages, reads one with platform users, and updates', async () => {
    const { userId } = await receive(s, wa, { from: '4917000001', name: 'Gina Graph', text: 'hi' });
    const list = await s.gql(
      a,
      `query($f: UserFilters) { users(filters: $f, first: 5) { edges { cursor node { id name platformUsers { platform externalId } } } pageInfo { hasNextPage endCursor } } }`,
      {
        f: { platform: 'WHATSAPP', nameContains: 'gina' },
      },
    );
    expect(list.json.errors).toBeUndefined();
    expect(list.json.data.users.edges).toEqual([
      {
        cursor: expect.any(String),
        node: { id: userId, name: 'Gina Graph', platformUsers: [{ platform: 'WHATSAPP', externalId: '4917000001' }] },
      },
    ]);

    // Paging by endCursor walks the same users as REST, once each.
    const ids: string[] = [];
    let after: string | null = null;
    for (let guard = 0; guard < 30; guard++) {
      const page: { json: any } = await s.gql(
        a,
        `query($a: String) { users(first: 3, after: $a) { edges { node { id } } pageInfo { hasNextPage endCursor } } }`,
        { a: after },
      );
      ids.push(...page.json.data.users.edges.map((e: { node: { id: string } }) => e.node.id));
      if (!page.json.data.users.pageInfo.hasNextPage) break;
      after = page.json.data.users.pageInfo.endCursor;
    }
    expect(ids).toEqual((await get('/v1/users?limit=200')).json.data.map((u: { id: string }) => u.id));

    const upd = await s.gql(a, `mutation($id: ID!) { updateUser(id: $id, name: "Gina G.", metadata: {vip: true}) { name metadata } }`, {
      id: userId,
    });
    expect(upd.json.data.updateUser).toEqual({ name: 'Gina G.', metadata: { vip: true } });
    const one = await s.gql(
      a,
      `query($id: ID!) { user(id: $id) { id name conversations { edges { node { externalId platform replyWindow { policy open } } } } } }`,
      { id: userId },
    );
    expect(one.json.data.user).toEqual({
      id: userId,
      name: 'Gina G.',
      conversations: {
        edges: [{ node: { externalId: '4917000001', platform: 'WHATSAPP', replyWindow: { policy: 'WINDOW_24H', open: true } } }],
      },
    });
    expect((await s.gql(b, `query($id: ID!) { user(id: $id) { id } }`, { id: userId })).json.data.user).toBeNull();
  });
});

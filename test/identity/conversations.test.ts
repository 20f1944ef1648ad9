import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { eventually, receive, seedConnection, type Conn } from './fixtures.js';

let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;
let tg: Conn;
let wa: Conn;

beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger'], env: { RATE_LIMIT_PER_MINUTE: '100000' } });
  a = await s.createApp();
  b = await s.createApp();
  tg = { appId: a.appId, id: await seedConnection(s, a.appId, 'TELEGRAM'), platform: 'TELEGRAM' };
  wa = { appId: a.appId, id: await seedConnection(s, a.appId, 'WHATSAPP'), platform: 'WHATSAPP' };
});
afterAll(() => s.close());

const get = (path: string, auth: AppCredentials = a) => s.request('GET', path, { auth });
const participantsOf = async (id: string) =>
  (await get(`/v1/conversations/${id}`)).json.participants as { platform_user_id: string; user_id: string; is_system_user: boolean }[];

describe('GET /v1/conversations/:id', () => {
  it('shows a private chat with its participants (the person and the bot), last event and reply window', async () => {
    const first = await receive(s, tg, { from: '9001', name: 'Pat', text: 'one' });
    const second = await receive(s, tg, { from: '9001', text: 'two' });
    expect(second.conversationId).toBe(first.conversationId);
    await eventually(async () => (await participantsOf(first.conversationId)).length === 2, 'participants');

    const r = await get(`/v1/conversations/${first.conversationId}`);
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({
      id: first.conversationId,
      platform_connection_id: tg.id,
      platform: 'telegram',
      external_id: '9001',
      thread_id: null,
      last_event_id: second.eventId,
    });
    expect(r.json.last_event).toMatchObject({ id: second.eventId, event_type: 'message.inbound', payload: { message: { text: 'two' } } });
    expect(r.json.participants).toEqual([
      expect.objectContaining({
        platform_user_id: first.platformUserId,
        user_id: first.userId,
        external_id: '9001',
        name: 'Pat',
        is_system_user: false,
        platform: 'telegram',
      }),
      expect.objectContaining({ external_id: 'bot', is_system_user: true }),
    ]);
    expect(r.json.reply_window).toMatchObject({ policy: 'user_must_start', open: true, closes_at: null });
  });

  it('lists everyone who spoke in a group; groups have no reply rule', async () => {
    const x = await receive(s, tg, { from: '9101', name: 'Xa', text: 'hi all', chat: '-100777' });
    const y = await receive(s, tg, { from: '9102', name: 'Yo', text: 'hey', chat: '-100777' });
    expect(y.conversationId).toBe(x.conversationId);
    await eventually(async () => (await participantsOf(x.conversationId)).length === 3, 'three participants');
    const r = await get(`/v1/conversations/${x.conversationId}`);
    expect(
      r.json.participants
        .filter((p: { is_system_user: boolean }) => !p.is_system_user)
        .map((p: { platform_user_id: string }) => p.platform_user_id),
    ).toEqual([x.platformUserId, y.platformUserId]);
    expect(r.json.reply_window).toMatchObject({ policy: 'none', open: true });
  });

  it('reports the 24-hour window on WhatsApp: open with its closing time, closed after 24 hours', async () => {
    const now = await receive(s, wa, { from: '4915550001', text: 'hi' });
    const r = await get(`/v1/conversations/${now.conversationId}`);
    expect(r.json.reply_window.policy).toBe('window_24h');
    expect(r.json.reply_window.open).toBe(true);
    expect(Date.parse(r.json.reply_window.closes_at) - Date.parse(r.json.reply_window.last_inbound_at)).toBe(24 * 3600_000);

    const at = new Date(Date.now() - 25 * 3600_000);
    const old = await receive(s, wa, { from: '4915550002', text: 'long ago', at });
    const closed = await get(`/v1/conversations/${old.conversationId}`);
    expect(closed.json.reply_window).toEqual({
      policy: 'window_24h',
      open: false,
      last_inbound_at: at.toISOString(),
      closes_at: new Date(at.getTime() + 24 * 3600_000).toISOString(),
    });
    // Sending applies the same rule: refused before any platform call.
    const send = await s.request('POST', '/v1/messages', {
      auth: a,
      body: { platform_connection_id: wa.id, to_external_id: '4915550002', message: 'still there?' },
    });
    expect(send.status).toBe(422);
    expect(send.json.error.code).toBe('REPLY_WINDOW_CLOSED');
    expect(send.json.error.message).toContain(closed.json.reply_window.closes_at);
  });

  it('follows identity: a participant shows the user it belongs to after a merge', async () => {
    const p = await receive(s, wa, { from: '4915550003', text: 'hi' });
    const q = await receive(s, tg, { from: '9201', text: 'hi' });
    await eventually(async () => (await participantsOf(p.conversationId)).length === 2, 'participants');
    await s.request('POST', `/v1/users/${q.userId}/merge`, { auth: a, body: { source_user_id: p.userId } });
    const person = (await participantsOf(p.conversationId)).find((x) => !x.is_system_user)!;
    expect(person).toMatchObject({ platform_user_id: p.platformUserId, user_id: q.userId });
  });

  it('answers 404 for unknown, malformed and foreign ids', async () => {
    const c = await receive(s, tg, { from: '9301', text: 'hi' });
    expect((await get('/v1/conversations/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await get('/v1/conversations/xyz')).json.error.code).toBe('NOT_FOUND');
    expect((await get(`/v1/conversations/${c.conversationId}`, b)).status).toBe(404);
  });
});

describe('GET /v1/conversations', () => {
  it('filters by connection and by user, and pages with a cursor', async () => {
    const u = await receive(s, tg, { from: '9401', text: 'a' });
    const g = await receive(s, tg, { from: '9401', text: 'b', chat: '-100888' });
    await eventually(
      async () => (await get(`/v1/conversations?user_id=${u.userId}`)).json.data.length === 2,
      'two conversations for the user',
    );
    const mine = (await get(`/v1/conversations?user_id=${u.userId}`)).json.data.map((c: { id: string }) => c.id);
    expect(mine).toEqual([u.conversationId, g.conversationId]);

    const waOnly = (await get(`/v1/conversations?platform_connection_id=${wa.id}&limit=200`)).json.data;
    expect(waOnly.length).toBeGreaterThan(0);
    expect(waOnly.every((c: { platform_connection_id: string }) => c.platform_connection_id === wa.id)).toBe(true);
    expect((await get(`/v1/conversations?platform_connection_id=${wa.id}&user_id=${u.userId}`)).json.data).toEqual([]);

    const seen: string[] = [];
    let after = '';
    for (let guard = 0; guard < 50; guard++) {
      const r = await get(`/v1/conversations?limit=2${after}`);
      expect(r.status).toBe(200);
      seen.push(...r.json.data.map((c: { id: string }) => c.id));
      if (!r.json.has_more) break;
      after = `&after=${r.json.next_cursor}`;
    }
    const all = (await get('/v1/conversations?limit=200')).json.data.map((c: { id: string }) => c.id);
    expect(seen).toEqual(all);
    expect(new Set(seen).size).toBe(seen.length);
  });

  it('refuses bad filters and cursors, and lists nothing of another application', async () => {
    expect((await get('/v1/conversations?user_id=nope')).json.error.code).toBe('VALIDATION_ERROR');
    expect((await get('/v1/conversations?after=AAAA')).json.error.code).toBe('INVALID_CURSOR');
    const usersCursor = (await get('/v1/users?limit=1')).json.next_cursor;
    expect((await get(`/v1/conversations?after=${usersCursor}`)).json.error.code).toBe('INVALID_CURSOR');
    expect((await get('/v1/conversations', b)).json.data).toEqual([]);
    expect((await get(`/v1/conversations?platform_connection_id=${tg.id}`, b)).json.data).toEqual([]);
  });

  it('needs events:read', async () => {
    const usersOnly = await s.createKey(a.appId, ['users:read']);
    expect((await get('/v1/conversations', usersOnly)).status).toBe(403);
  });
});

describe('GraphQL conversations', () => {
  it('lists and reads conversations with participants, last event and reply window', async () => {
    const m = await receive(s, wa, { from: '4915550099', name: 'Gee', text: 'graph me' });
    await eventually(async () => (await participantsOf(m.conversationId)).length === 2, 'participants');
    const list = await s.gql(
      a,
      `query($u: ID!) { conversations(filters: { userId: $u }) { edges { cursor node { id platform externalId } } pageInfo { hasNextPage } } }`,
      { u: m.userId },
    );
    expect(list.json.data.conversations).toEqual({
      edges: [{ cursor: expect.any(String), node: { id: m.conversationId, platform: 'WHATSAPP', externalId: '4915550099' } }],
      pageInfo: { hasNextPage: false },
    });
    const one = await s.gql(
      a,
      `query($id: ID!) { conversation(id: $id) { participants { userId name isSystemUser } lastEvent { id payload } replyWindow { policy open closesAt } } }`,
      { id: m.conversationId },
    );
    expect(one.json.errors).toBeUndefined();
    expect(one.json.data.conversation.participants).toEqual([
      { userId: m.userId, name: 'Gee', isSystemUser: false },
      expect.objectContaining({ isSystemUser: true }),
    ]);
    expect(one.json.data.conversation.lastEvent.id).toBe(m.eventId);
    expect(one.json.data.conversation.replyWindow).toMatchObject({ policy: 'WINDOW_24H', open: true });
    expect(
      (await s.gql(b, `query($id: ID!) { conversation(id: $id) { id } }`, { id: m.conversationId })).json.data.conversation,
    ).toBeNull();
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CODE_ALPHABET, codeInMessage, normaliseCode } from '../../src/identity/link-codes.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { eventsOfType, eventually, receive, seedConnection, type Conn } from './fixtures.js';

const PER_APP = 12;
let s: TestStack;
let seq = 0;

beforeAll(async () => {
  s = await startTestStack({
    workers: ['ledger'],
    env: { RATE_LIMIT_PER_MINUTE: '100000', LINK_CODE_ATTEMPTS_PER_USER: '5', LINK_CODE_ATTEMPTS_PER_APP: String(PER_APP) },
  });
});
afterAll(() => s.close());

/** Each test gets its own application: the guessing budget is per application. */
async function world(tgConfig: Record<string, unknown> = { bot_username: 'acme_support_bot' }) {
  const app = await s.createApp();
  const tg: Conn = { appId: app.appId, id: await seedConnection(s, app.appId, 'TELEGRAM', tgConfig), platform: 'TELEGRAM' };
  const wa: Conn = {
    appId: app.appId,
    id: await seedConnection(s, app.appId, 'WHATSAPP', { display_phone_number: '+1 555 010 0200' }),
    platform: 'WHATSAPP',
  };
  const person = (conn: Conn, text = 'hi', name?: string) =>
    receive(s, conn, { from: `${conn.platform === 'WHATSAPP' ? '4915' : '7'}${++seq}${Date.now() % 10000}`, name, text });
  const code = async (userId: string, body: Record<string, unknown> = {}) => {
    const r = await s.request('POST', '/v1/link-codes', { auth: app, body: { user_id: userId, ...body } });
    expect(r.status, JSON.stringify(r.json)).toBe(201);
    return r.json as {
      id: string;
      code: string;
      expires_at: string;
      deep_links: { platform: string; platform_connection_id: string; url: string }[];
    };
  };
  const activate = (c: string, platformUserId: string, auth: AppCredentials = app) =>
    s.request('POST', `/v1/link-codes/${encodeURIComponent(c)}/activate`, { auth, body: { platform_user_id: platformUserId } });
  return { app, tg, wa, person, code, activate };
}

const wrongCode = (c: string) => c.slice(0, 7) + (c[7] === '2' ? '3' : '2');

describe('codes', () => {
  it('normalises what people type and recognises only a code or /start <code>', () => {
    expect(normaliseCode(' k7qm4xpd ')).toBe('K7QM4XPD');
    expect(normaliseCode('k7qm-4xpd')).toBe('K7QM4XPD');
    expect(normaliseCode('K7QM 4XPD')).toBe('K7QM4XPD');
    for (const bad of ['K7QM4XP', 'K7QM4XPDD', 'K7QO4XPD', 'K1QM4XPD', 'hello there', 'K7QM--4XPD'])
      expect(normaliseCode(bad), bad).toBeUndefined();
    expect(codeInMessage('TELEGRAM', '/start K7QM4XPD')).toBe('K7QM4XPD');
    expect(codeInMessage('TELEGRAM', '/start@acme_bot k7qm4xpd')).toBe('K7QM4XPD');
    expect(codeInMessage('WHATSAPP', '/start K7QM4XPD')).toBeUndefined();
    expect(codeInMessage('TELEGRAM', 'my code is K7QM4XPD')).toBeUndefined();
  });
});

describe('POST /v1/link-codes', () => {
  it('issues a short single-use code of the unambiguous alphabet with deep links, and records link_code.generated without the code', async () => {
    const w = await world();
    const p = await w.person(w.tg, 'hi', 'Ann');
    const before = Date.now();
    const c = await w.code(p.userId);
    expect(c.code).toMatch(new RegExp(`^[${CODE_ALPHABET}]{8}$`));
    expect(CODE_ALPHABET).not.toMatch(/[01OIL]/);
    expect(8 * Math.log2(CODE_ALPHABET.length)).toBeGreaterThanOrEqual(30);
    const ttl = Date.parse(c.expires_at) - before;
    expect(ttl).toBeGreaterThan(595_000);
    expect(ttl).toBeLessThan(605_000);
    expect(c.deep_links).toEqual([
      { platform: 'telegram', platform_connection_id: w.tg.id, url: `https://t.me/acme_support_bot?start=${c.code}` },
      { platform: 'whatsapp', platform_connection_id: w.wa.id, url: `https://wa.me/15550100200?text=${c.code}` },
    ]);
    const stored = await s.deps.sql`SELECT * FROM link_codes WHERE id = ${c.id}`;
    expect(JSON.stringify(stored)).not.toContain(c.code);

    await eventually(async () => (await eventsOfType(s, w.app.appId, 'link_code.generated')).length === 1, 'link_code.generated');
    const [ev] = await eventsOfType(s, w.app.appId, 'link_code.generated');
    expect(ev.payload).toEqual({ link_code_id: c.id, user_id: p.userId, expires_at: c.expires_at });
    expect(JSON.stringify(ev.payload)).not.toContain(c.code);
  });

  it('takes ttl_seconds, leaves out links it cannot build, and refuses bad input', async () => {
    const w = await world({});
    const p = await w.person(w.tg);
    const c = await w.code(p.userId, { ttl_seconds: 60 });
    expect(Date.parse(c.expires_at) - Date.now()).toBeLessThan(61_000);
    expect(c.deep_links.map((l) => l.platform)).toEqual(['whatsapp']);
    for (const body of [
      { user_id: p.userId, ttl_seconds: 5 },
      { user_id: p.userId, ttl_seconds: 10 ** 7 },
      { user_id: p.userId, ttl_seconds: '60' },
      {},
    ]) {
      const r = await s.request('POST', '/v1/link-codes', { auth: w.app, body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.error.code).toBe('VALIDATION_ERROR');
    }
    expect(
      (await s.request('POST', '/v1/link-codes', { auth: w.app, body: { user_id: '00000000-0000-4000-8000-000000000000' } })).json.error,
    ).toMatchObject({
      code: 'NOT_FOUND',
      details: [expect.objectContaining({ path: ['user_id'] })],
    });
    const other = await world();
    expect((await s.request('POST', '/v1/link-codes', { auth: other.app, body: { user_id: p.userId } })).status).toBe(404);
  });
});

describe('linking through an inbound message', () => {
  it('a WhatsApp message that is exactly the code joins the WhatsApp account to the Telegram user', async () => {
    const w = await world();
    const ann = await w.person(w.tg, 'hi', 'Ann');
    const c = await w.code(ann.userId);
    const wa = await w.person(w.wa, ` ${c.code.toLowerCase()} `, 'Ann WA');

    expect(wa.activation).toMatchObject({
      status: 'linked',
      activation: { user_id: ann.userId, platform_user_id: wa.platformUserId, replayed: false },
    });
    const mergedAway = wa.userId; // the user created on first sight of the WhatsApp account
    expect(mergedAway).not.toBe(ann.userId);
    const user = await s.request('GET', `/v1/users/${ann.userId}`, { auth: w.app });
    expect(user.json.platform_users.map((p: { platform: string }) => p.platform).sort()).toEqual(['telegram', 'whatsapp']);
    expect((await s.request('GET', `/v1/users/${mergedAway}`, { auth: w.app })).json.error).toMatchObject({
      code: 'USER_MERGED',
      details: [expect.objectContaining({ merged_into: ann.userId })],
    });

    await eventually(
      async () =>
        (await eventsOfType(s, w.app.appId, 'link_code.activation')).length === 1 &&
        (await eventsOfType(s, w.app.appId, 'user.merged')).length === 1,
      'events',
    );
    const [act] = await eventsOfType(s, w.app.appId, 'link_code.activation');
    expect(act.payload).toEqual({
      link_code_id: c.id,
      user_id: ann.userId,
      platform_user_id: wa.platformUserId,
      merged_user_id: mergedAway,
      via: 'inbound',
    });
    const [merged] = await eventsOfType(s, w.app.appId, 'user.merged');
    expect(merged.payload).toEqual({
      target_user_id: ann.userId,
      source_user_id: mergedAway,
      platform_user_ids: [wa.platformUserId],
      link_code_id: c.id,
    });
    // The message that carried the code is recorded as usual, and now shows under Ann.
    const msg = (await s.request('GET', `/v1/events/${wa.eventId}`, { auth: w.app })).json;
    expect(msg.payload.message.text).toBe(` ${c.code.toLowerCase()} `);
    const annEvents = (await s.request('GET', `/v1/users/${ann.userId}/events?event_type=message.inbound`, { auth: w.app })).json.data.map(
      (e: { id: string }) => e.id,
    );
    expect(annEvents).toEqual([ann.eventId, wa.eventId]);
  });

  it('Telegram /start <code> (what the t.me deep link sends) links the Telegram account to the WhatsApp user', async () => {
    const w = await world();
    const bea = await w.person(w.wa, 'hello', 'Bea');
    const c = await w.code(bea.userId);
    const tg = await w.person(w.tg, `/start ${c.code}`, 'Bea TG');
    expect(tg.activation).toMatchObject({ status: 'linked', activation: { user_id: bea.userId, merged_user_id: tg.userId } });
    const after = await w.person(w.tg, 'second message');
    expect(after.activation).toEqual({ status: 'not_a_code' });
    const users = (await s.request('GET', '/v1/users?platform=telegram', { auth: w.app })).json.data.map((u: { id: string }) => u.id);
    expect(users).toContain(bea.userId);
    expect(users).not.toContain(tg.userId);
  });

  it('a wrong, used or expired code in a message links nothing and the message is still recorded', async () => {
    const w = await world();
    const owner = await w.person(w.tg);
    const c = await w.code(owner.userId);
    const guess = await w.person(w.wa, wrongCode(c.code));
    expect(guess.activation).toMatchObject({ status: 'refused', code: 'LINK_CODE_NOT_FOUND' });
    expect((await s.request('GET', `/v1/events/${guess.eventId}`, { auth: w.app })).status).toBe(200);
    expect((await s.request('GET', `/v1/users/${guess.userId}`, { auth: w.app })).status).toBe(200);
    await s.deps.sql`UPDATE link_codes SET expires_at = now() - interval '1 second' WHERE id = ${c.id}`;
    const late = await w.person(w.wa, c.code);
    expect(late.activation).toMatchObject({ status: 'refused', code: 'LINK_CODE_EXPIRED' });
  });
});

describe('POST /v1/link-codes/:code/activate', () => {
  it('links a platform user through the API, and a repeat by the same platform user replays', async () => {
    const w = await world();
    const owner = await w.person(w.tg, 'hi', 'Cleo');
    const other = await w.person(w.wa, 'hi', 'Cleo WA');
    const c = await w.code(owner.userId);
    const r = await w.activate(c.code, other.platformUserId);
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      link_code_id: c.id,
      user_id: owner.userId,
      platform_user_id: other.platformUserId,
      merged_user_id: other.userId,
      replayed: false,
    });
    const again = await w.activate(c.code, other.platformUserId);
    expect(again.status).toBe(200);
    expect(again.json).toEqual({ ...r.json, replayed: true });
    await eventually(async () => (await eventsOfType(s, w.app.appId, 'link_code.activation')).length === 1, 'activation');
    expect(await eventsOfType(s, w.app.appId, 'user.merged')).toHaveLength(1);
    const act = (await eventsOfType(s, w.app.appId, 'link_code.activation'))[0];
    expect(act.payload.via).toBe('api');
  });

  it("links nothing for a platform user already on the code's user", async () => {
    const w = await world();
    const owner = await w.person(w.tg);
    const c = await w.code(owner.userId);
    const r = await w.activate(c.code, owner.platformUserId);
    expect(r.json).toMatchObject({ user_id: owner.userId, merged_user_id: null });
    expect(await s.deps.sql`SELECT 1 FROM user_merges WHERE target_user_id = ${owner.userId}`).toHaveLength(0);
  });

  it('answers unknown, malformed, expired and used codes with clear 4xx codes', async () => {
    const w = await world();
    const owner = await w.person(w.tg);
    const p1 = await w.person(w.wa);
    const p2 = await w.person(w.wa);
    const c = await w.code(owner.userId);
    const unknown = await w.activate(wrongCode(c.code), p1.platformUserId);
    expect([unknown.status, unknown.json.error.code]).toEqual([404, 'LINK_CODE_NOT_FOUND']);
    const malformed = await w.activate('not-a-code!', p1.platformUserId);
    expect([malformed.status, malformed.json.error.code]).toEqual([400, 'VALIDATION_ERROR']);
    expect((await w.activate(c.code, '00000000-0000-4000-8000-000000000000')).json.error.code).toBe('NOT_FOUND');

    expect((await w.activate(c.code, p1.platformUserId)).status).toBe(200);
    const used = await w.activate(c.code, p2.platformUserId);
    expect([used.status, used.json.error.code]).toEqual([409, 'LINK_CODE_USED']);
    expect((await s.request('GET', `/v1/users/${p2.userId}`, { auth: w.app })).status).toBe(200);

    const c2 = await w.code(owner.userId);
    await s.deps.sql`UPDATE link_codes SET expires_at = now() - interval '1 second' WHERE id = ${c2.id}`;
    const expired = await w.activate(c2.code, p2.platformUserId);
    expect([expired.status, expired.json.error.code]).toEqual([410, 'LINK_CODE_EXPIRED']);
    expect((await s.request('GET', `/v1/users/${p2.userId}`, { auth: w.app })).json.platform_users).toHaveLength(1);
  });

  it('lets exactly one of two platform users racing for one code win', async () => {
    const w = await world();
    const owner = await w.person(w.tg);
    const racers = await Promise.all(Array.from({ length: 6 }, () => w.person(w.wa)));
    const c = await w.code(owner.userId);
    const answers = await Promise.all(racers.map((r) => w.activate(c.code, r.platformUserId)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409, 409, 409, 409, 409]);
    expect((await s.request('GET', `/v1/users/${owner.userId}`, { auth: w.app })).json.platform_users).toHaveLength(2);
  });

  it('a code for a user merged away since links to the survivor', async () => {
    const w = await world();
    const first = await w.person(w.tg);
    const survivor = await w.person(w.tg);
    const c = await w.code(first.userId);
    await s.request('POST', `/v1/users/${survivor.userId}/merge`, { auth: w.app, body: { source_user_id: first.userId } });
    const wa = await w.person(w.wa);
    expect((await w.activate(c.code, wa.platformUserId)).json).toMatchObject({ user_id: survivor.userId, merged_user_id: wa.userId });
  });

  it('works the same through GraphQL', async () => {
    const w = await world();
    const owner = await w.person(w.tg);
    const other = await w.person(w.wa);
    const created = await s.gql(
      w.app,
      `mutation($u: ID!) { createLinkCode(userId: $u, ttlSeconds: 120) { id code expiresAt deepLinks { platform url } } }`,
      { u: owner.userId },
    );
    const lc = created.json.data.createLinkCode;
    expect(lc.deepLinks).toEqual([
      { platform: 'telegram', url: `https://t.me/acme_support_bot?start=${lc.code}` },
      { platform: 'whatsapp', url: `https://wa.me/15550100200?text=${lc.code}` },
    ]);
    const act = await s.gql(
      w.app,
      `mutation($c: String!, $p: ID!) { activateLinkCode(code: $c, platformUserId: $p) { userId mergedUserId replayed } }`,
      { c: lc.code, p: other.platformUserId },
    );
    expect(act.json.data.activateLinkCode).toEqual({ userId: owner.userId, mergedUserId: other.userId, replayed: false });
    const reuse = await s.gql(w.app, `mutation($c: String!, $p: ID!) { activateLinkCode(code: $c, platformUserId: $p) { userId } }`, {
      c: lc.code,
      p: owner.platformUserId,
    });
    expect(reuse.json.errors[0].extensions.code).toBe('LINK_CODE_USED');
  });

  it("cannot use another application's code", async () => {
    const w = await world();
    const other = await world();
    const owner = await w.person(w.tg);
    const c = await w.code(owner.userId);
    const foreigner = await other.person(other.wa);
    expect((await other.activate(c.code, foreigner.platformUserId)).json.error.code).toBe('LINK_CODE_NOT_FOUND');
    expect((await other.activate(c.code, owner.platformUserId)).json.error.code).toBe('NOT_FOUND');
    expect((await w.activate(c.code, foreigner.platformUserId)).json.error.code).toBe('NOT_FOUND');
  });
});

describe('guessing is throttled', () => {
  it('per platform user: after 5 failed attempts even the right code is refused with 429, others are unaffected', async () => {
    const w = await world();
    const owner = await w.person(w.tg);
    const guesser = await w.person(w.wa);
    const honest = await w.person(w.wa);
    const c = await w.code(owner.userId);
    for (let i = 0; i < 5; i++) expect((await w.activate(wrongCode(c.code), guesser.platformUserId)).status).toBe(404);
    const blocked = await w.activate(c.code, guesser.platformUserId);
    expect(blocked.status).toBe(429);
    expect(blocked.json.error.code).toBe('LINK_CODE_ATTEMPTS_EXCEEDED');
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    // The inbound path shares the budget.
    const viaMessage = await receive(s, w.wa, {
      from: (await s.request('GET', `/v1/users/${guesser.userId}`, { auth: w.app })).json.platform_users[0].external_id,
      text: c.code,
    });
    expect(viaMessage.activation).toMatchObject({ status: 'refused', code: 'LINK_CODE_ATTEMPTS_EXCEEDED' });
    expect((await w.activate(c.code, honest.platformUserId)).status).toBe(200);
  });

  it('successful activations do not spend the budget', async () => {
    const w = await world();
    const owner = await w.person(w.tg);
    const p = await w.person(w.wa);
    for (let i = 0; i < 7; i++) {
      const c = await w.code(owner.userId);
      expect((await w.activate(c.code, p.platformUserId)).status).toBe(200);
    }
  });

  it(`per application: after ${PER_APP} failed attempts across platform users, the application is throttled`, async () => {
    const w = await world();
    const owner = await w.person(w.tg);
    const c = await w.code(owner.userId);
    const guessers = await Promise.all(Array.from({ length: 5 }, () => w.person(w.wa)));
    const statuses: number[] = [];
    for (let i = 0; i < PER_APP; i++) statuses.push((await w.activate(wrongCode(c.code), guessers[i % 5].platformUserId)).status);
    expect(statuses.every((st) => st === 404)).toBe(true);
    const fresh = await w.person(w.wa);
    const blocked = await w.activate(c.code, fresh.platformUserId);
    expect([blocked.status, blocked.json.error.code]).toEqual([429, 'LINK_CODE_ATTEMPTS_EXCEEDED']);
    // Another application keeps its own budget.
    const elsewhere = await world();
    const o2 = await elsewhere.person(elsewhere.tg);
    const c2 = await elsewhere.code(o2.userId);
    const p2 = await elsewhere.person(elsewhere.wa);
    expect((await elsewhere.activate(c2.code, p2.platformUserId)).status).toBe(200);
  });
});

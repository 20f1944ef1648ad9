import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { asSession as asSessionOf, exchangeLink, type SignedIn, tokenOf } from '../helpers/portal.js';
import { openSse } from '../helpers/sse.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

let s: TestStack;
let app: AppCredentials;
beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger'] });
  app = await s.createApp();
});
afterAll(() => s.close());

async function signInUrl(auth: AppCredentials, body: Record<string, unknown> = {}): Promise<string> {
  const r = await s.request('POST', '/v1/portal/sessions', { auth, body });
  expect(r.status, r.text).toBe(201);
  return r.json.url;
}

async function exchange(token: string) {
  return s.request('POST', '/portal/session', { body: { token } });
}

const signIn = async (auth: AppCredentials = app, body: Record<string, unknown> = {}): Promise<SignedIn> =>
  exchangeLink(s, await signInUrl(auth, body));

const asSession = (si: SignedIn, method: string, path: string, body?: unknown, csrf = true) => asSessionOf(s, si, method, path, body, csrf);

describe('POST /v1/portal/sessions', () => {
  it('needs the admin scope', async () => {
    const reader = await s.createKey(app.appId, ['events:read', 'events:write', 'users:read', 'users:write']);
    const r = await s.request('POST', '/v1/portal/sessions', { auth: reader, body: {} });
    expect(r.status).toBe(403);
    expect(r.json.error.code).toBe('FORBIDDEN');
    expect((await s.request('POST', '/v1/portal/sessions', { body: {} })).status).toBe(401);
  });

  it('answers a sign-in URL under the public base URL with the token in its fragment, and when it expires', async () => {
    const before = Date.now();
    const r = await s.request('POST', '/v1/portal/sessions', { auth: app, body: { expires_in_seconds: 120 } });
    expect(r.status).toBe(201);
    expect(r.json.url).toMatch(new RegExp(`^${s.config.PUBLIC_BASE_URL}/portal/signin#token=gwp_[A-Za-z0-9_-]{43}$`));
    const expires = Date.parse(r.json.expires_at);
    expect(expires).toBeGreaterThanOrEqual(before + 119_000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 121_000);
    // Only a hash is stored.
    const rows = await s.deps.sql`SELECT token_hash::text AS h FROM portal_sessions WHERE app_id = ${app.appId}`;
    expect(JSON.stringify(rows)).not.toContain(tokenOf(r.json.url));
  });

  it('refuses bad bodies with 400 and creates nothing', async () => {
    const [{ n: before }] = await s.deps.sql`SELECT count(*)::int AS n FROM portal_sessions`;
    for (const body of [
      { areas: ['everything'] },
      { areas: [] },
      { return_url: 'http://example.com/back' },
      { return_url: 'javascript:alert(1)' },
      { return_url: '' },
      { theme: { logo_url: '' } },
      { theme: { accent_color: 'red' } },
      { theme: { logo_url: 'ftp://example.com/logo.png' } },
      { expires_in_seconds: 30 },
      { expires_in_seconds: 3601 },
      { unknown: 1 },
    ]) {
      const r = await s.request('POST', '/v1/portal/sessions', { auth: app, body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.error.code).toBe('VALIDATION_ERROR');
    }
    const [{ n: after }] = await s.deps.sql`SELECT count(*)::int AS n FROM portal_sessions`;
    expect(after).toBe(before);
    // Outside production, a developer's own machine may be the return address.
    expect((await s.request('POST', '/v1/portal/sessions', { auth: app, body: { return_url: 'http://localhost:5173/back' } })).status).toBe(
      201,
    );
  });
});

describe('the sign-in exchange', () => {
  it('works once and only once, answering the session with its theme and return URL', async () => {
    const url = await signInUrl(app, {
      areas: ['webhooks'],
      return_url: 'https://acme.example/settings',
      theme: { accent_color: '#1a2b3c', logo_url: 'https://acme.example/logo.svg' },
    });
    const first = await exchange(tokenOf(url));
    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({
      application_id: app.appId,
      areas: ['webhooks'],
      return_url: 'https://acme.example/settings',
      theme: { accent_color: '#1a2b3c', logo_url: 'https://acme.example/logo.svg' },
      csrf_token: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    expect(first.json.application_name).toMatch(/^test-/);
    expect(Date.parse(first.json.expires_at)).toBeGreaterThan(Date.now() + 7 * 3600_000);
    expect(first.headers.get('cache-control')).toBe('no-store');
    expect(JSON.stringify(first.json)).not.toContain(app.apiKey);

    const again = await exchange(tokenOf(url));
    expect(again.status).toBe(401);
    expect(again.json.error.code).toBe('UNAUTHORIZED');
    expect(again.headers.get('set-cookie')).toBeNull();
  });

  it('refuses an expired token and a forged one', async () => {
    const url = await signInUrl(app);
    await s.deps
      .sql`UPDATE portal_sessions SET token_expires_at = now() - interval '1 second' WHERE app_id = ${app.appId} AND exchanged_at IS NULL`;
    expect((await exchange(tokenOf(url))).status).toBe(401);
    for (const forged of [`gwp_${'A'.repeat(43)}`, 'not-a-token', tokenOf(url).slice(0, -1)]) {
      const r = await exchange(forged);
      expect(r.status, forged).toBe(401);
    }
  });

  it('sets an HttpOnly, SameSite=Strict cookie on path / (not Secure outside production)', async () => {
    const { setCookie } = await signIn();
    expect(setCookie).toMatch(/^gw_portal=[A-Za-z0-9_-]{43};/);
    expect(setCookie).toMatch(/; HttpOnly/);
    expect(setCookie).toMatch(/; SameSite=Strict/);
    expect(setCookie).toMatch(/; Path=\//);
    expect(setCookie).toMatch(/; Expires=/);
    expect(setCookie).not.toMatch(/Secure/);
  });

  it('GET /portal/session answers the current session, or 401 without one', async () => {
    const si = await signIn();
    const r = await asSession(si, 'GET', '/portal/session');
    expect(r.status).toBe(200);
    expect(r.json).toEqual(si.body);
    const none = await s.request('GET', '/portal/session');
    expect(none.status).toBe(401);
    expect(none.json.error.code).toBe('UNAUTHORIZED');
    const bogus = await s.request('GET', '/portal/session', { headers: { Cookie: `gw_portal=${'x'.repeat(43)}` } });
    expect(bogus.status).toBe(401);
  });
});

describe('the public API by session cookie', () => {
  it('reads and, with the CSRF token, writes as the application; without the token a write is 403 and changes nothing', async () => {
    const si = await signIn();
    const list = await asSession(si, 'GET', '/v1/events');
    expect(list.status, list.text).toBe(200);

    const refused = await asSession(si, 'POST', '/v1/events', { event_type: 'portal.csrf_refused', payload: {} }, false);
    expect(refused.status).toBe(403);
    expect(refused.json.error.message).toMatch(/X-CSRF-Token/);
    const wrong = await s.request('POST', '/v1/events', {
      body: { event_type: 'portal.csrf_wrong', payload: {} },
      headers: { Cookie: si.cookie, 'X-CSRF-Token': 'x'.repeat(43) },
    });
    expect(wrong.status).toBe(403);

    const created = await asSession(si, 'POST', '/v1/events', { event_type: 'portal.csrf_ok', payload: { n: 1 } });
    expect(created.status, created.text).toBe(201);
    expect(created.json.app_id).toBe(app.appId);
    const types = await s.deps.sql`SELECT event_type FROM events WHERE app_id = ${app.appId} AND event_type LIKE 'portal.%'`;
    expect(types.map((t) => t.event_type)).toEqual(['portal.csrf_ok']);

    // An API-key request needs no CSRF token.
    const byKey = await s.request('POST', '/v1/events', { auth: app, body: { event_type: 'portal.by_key', payload: {} } });
    expect(byKey.status).toBe(201);
  });

  it('GraphQL: a query by cookie runs; a mutation needs the CSRF token', async () => {
    const si = await signIn();
    const q = await s.request('POST', '/graphql', {
      body: { query: '{ webhookSubscriptions { id } }' },
      headers: { Cookie: si.cookie, 'X-CSRF-Token': si.csrf },
    });
    expect(q.status, q.text).toBe(200);
    expect(q.json.errors).toBeUndefined();
    const m = await s.request('POST', '/graphql', {
      body: { query: 'mutation { createEvent(eventType: "portal.gql", payload: {}) { id } }' },
      headers: { Cookie: si.cookie },
    });
    expect(m.status).toBe(403);
  });

  it('a session never lets an API key through a different application, and cannot mint sessions', async () => {
    const si = await signIn();
    const other = await s.createApp();
    const r = await s.request('GET', '/v1/events', { headers: { Cookie: si.cookie, 'X-Service-App-ID': other.appId } });
    expect(r.status).toBe(401);
    const mint = await asSession(si, 'POST', '/v1/portal/sessions', {});
    expect(mint.status).toBe(403);
  });

  it('a webhooks-only session reaches webhooks and gets 403 everywhere else', async () => {
    const si = await signIn(app, { areas: ['webhooks'] });
    expect((await asSession(si, 'GET', '/v1/webhook-subscriptions')).status).toBe(200);
    const created = await asSession(si, 'POST', '/v1/webhook-subscriptions', {
      name: 'portal',
      target_url: 'https://receiver.example/hook',
      event_patterns: ['order.*'],
    });
    expect(created.status, created.text).toBe(201);
    expect((await asSession(si, 'GET', `/v1/webhook-subscriptions/${created.json.id}/deliveries`)).status).toBe(200);
    for (const [method, path] of [
      ['GET', '/v1/events'],
      ['GET', '/v1/platform-connections'],
      ['GET', '/v1/users'],
      ['GET', '/v1/conversations'],
      ['GET', '/v1/event-schemas'],
      ['POST', '/graphql'],
    ] as const) {
      const r = await asSession(si, method, path, method === 'POST' ? { query: '{ webhookSubscriptions { id } }' } : undefined);
      expect(r.status, `${method} ${path}`).toBe(403);
      expect(r.json.error.message).toMatch(/webhooks/);
    }
    const stream = await openSse(`${s.base}/events/stream`, { headers: { Cookie: si.cookie } });
    expect(stream.status).toBe(403);
  });
});

describe('ending a session', () => {
  it('DELETE /v1/portal/sessions ends every session of the application at once', async () => {
    const si = await signIn();
    const unused = await signInUrl(app);
    expect((await asSession(si, 'GET', '/v1/events')).status).toBe(200);
    const r = await s.request('DELETE', '/v1/portal/sessions', { auth: app });
    expect(r.status).toBe(200);
    expect(r.json.revoked).toBeGreaterThanOrEqual(2);
    expect((await asSession(si, 'GET', '/v1/events')).status).toBe(401);
    expect((await asSession(si, 'GET', '/portal/session')).status).toBe(401);
    expect((await exchange(tokenOf(unused))).status).toBe(401);
  });

  it('lists live sessions and unused links, and ends one by id without touching the others', async () => {
    const owner = await s.createApp();
    const one = await signIn(owner);
    const two = await signIn(owner, { areas: ['webhooks'] });
    await signInUrl(owner);
    const list = await s.request('GET', '/v1/portal/sessions', { auth: owner });
    expect(list.status).toBe(200);
    expect(list.json.data).toHaveLength(3);
    expect(list.json.data.filter((x: { exchanged_at: string | null }) => x.exchanged_at === null)).toHaveLength(1);
    expect(list.json.data.every((x: { created_by_key_id: string }) => x.created_by_key_id === owner.keyId)).toBe(true);
    const target = list.json.data.find((x: { areas: string[] }) => x.areas[0] === 'webhooks');
    expect((await asSession(one, 'GET', '/v1/webhook-subscriptions')).status).toBe(200);
    expect((await asSession(two, 'GET', '/v1/webhook-subscriptions')).status).toBe(200);

    expect((await s.request('DELETE', `/v1/portal/sessions/${target.id}`, { auth: app })).status).toBe(404);
    expect((await s.request('DELETE', `/v1/portal/sessions/${target.id}`, { auth: owner })).status).toBe(204);
    expect((await asSession(two, 'GET', '/v1/webhook-subscriptions')).status).toBe(401);
    expect((await asSession(one, 'GET', '/v1/webhook-subscriptions')).status).toBe(200);
    expect((await s.request('DELETE', `/v1/portal/sessions/${target.id}`, { auth: owner })).status).toBe(404);
    expect((await s.request('DELETE', '/v1/portal/sessions/nope', { auth: owner })).status).toBe(404);
    expect((await s.request('GET', '/v1/portal/sessions', { auth: owner })).json.data).toHaveLength(2);
  });

  it('revoking the key that minted the session ends it (cached auth included)', async () => {
    const admin = await s.createKey(app.appId, ['admin', 'events:read']);
    const si = await signIn(admin);
    expect((await asSession(si, 'GET', '/v1/events')).status).toBe(200);
    const revoked = await s.request('DELETE', `/v1/api-keys/${admin.keyId}`, { auth: app });
    expect(revoked.status, revoked.text).toBe(204);
    expect((await asSession(si, 'GET', '/v1/events')).status).toBe(401);
  });

  it('a session ends 8 hours after sign-in, whether its row is cached or read afresh', async () => {
    const cached = await signIn();
    expect((await asSession(cached, 'GET', '/v1/events')).status).toBe(200);
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(Date.now() + 8 * 3600_000 + 1000);
      expect((await asSession(cached, 'GET', '/v1/events')).status).toBe(401);
    } finally {
      vi.useRealTimers();
    }
    const fresh = await signIn();
    await s.deps.sql`UPDATE portal_sessions SET expires_at = now() - interval '1 second' WHERE expires_at > now() + interval '7 hours'`;
    expect((await asSession(fresh, 'GET', '/portal/session')).status).toBe(401);
  });

  it('signing out needs the CSRF token, then ends the session and clears the cookie', async () => {
    const si = await signIn();
    expect((await asSession(si, 'DELETE', '/portal/session', undefined, false)).status).toBe(403);
    const out = await asSession(si, 'DELETE', '/portal/session');
    expect(out.status).toBe(204);
    expect(out.headers.get('set-cookie')).toMatch(/^gw_portal=;.*Expires=Thu, 01 Jan 1970/);
    expect((await asSession(si, 'GET', '/v1/events')).status).toBe(401);
  });

  it('an event stream opened by cookie ends when the session expires', async () => {
    const si = await signIn();
    // Read afresh on its first use: the session has a second left.
    await s.deps.sql`UPDATE portal_sessions SET expires_at = now() + interval '1 second' WHERE expires_at > now() + interval '7 hours'`;
    const stream = await openSse(`${s.base}/events/stream`, { headers: { Cookie: si.cookie } });
    expect(stream.status).toBe(200);
    let frame = await stream.next(10_000);
    while (frame && frame.event !== 'error') frame = await stream.next(10_000);
    expect(JSON.parse(frame?.data ?? '{}').error.code).toBe('UNAUTHORIZED');
    expect(await stream.ended).toBe('end');
    stream.close();
  });

  it('an event stream opened by cookie ends when the session is revoked', async () => {
    const si = await signIn();
    const stream = await openSse(`${s.base}/events/stream`, { headers: { Cookie: si.cookie } });
    expect(stream.status).toBe(200);
    await s.request('DELETE', '/v1/portal/sessions', { auth: app });
    let frame = await stream.next(10_000);
    while (frame && frame.event !== 'error') frame = await stream.next(10_000);
    expect(JSON.parse(frame?.data ?? '{}').error).toEqual({
      code: 'UNAUTHORIZED',
      message: 'The API key was revoked, or the portal session ended',
    });
    expect(await stream.ended).toBe('end');
    stream.close();
  });
});

describe('in production', () => {
  it('marks the session cookie Secure', async () => {
    const prod = await startTestStack({ workers: false, env: { NODE_ENV: 'production', PUBLIC_BASE_URL: 'https://gw.example.com' } });
    try {
      const owner = await prod.createApp();
      const link = await prod.request('POST', '/v1/portal/sessions', { auth: owner, body: {} });
      expect(link.json.url).toMatch(/^https:\/\/gw\.example\.com\/portal\/signin#token=/);
      // Plain http to localhost is for development only.
      const local = await prod.request('POST', '/v1/portal/sessions', { auth: owner, body: { return_url: 'http://localhost:8080/back' } });
      expect(local.status).toBe(400);
      const r = await prod.request('POST', '/portal/session', { body: { token: new URL(link.json.url).hash.slice('#token='.length) } });
      expect(r.status).toBe(200);
      expect(r.headers.get('set-cookie')).toMatch(/; Secure/);
    } finally {
      await prod.close();
    }
  });
});

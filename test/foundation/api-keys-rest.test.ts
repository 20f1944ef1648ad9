import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../inbound/helpers.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

let s: TestStack;
let app: AppCredentials;
beforeAll(async () => {
  s = await startTestStack({ workers: false });
  app = await s.createApp();
});
afterAll(() => s.close());

const bearer = (appId: string, apiKey: string) => ({ headers: { Authorization: `Bearer ${apiKey}`, 'X-Service-App-ID': appId } });

describe('API keys over REST', () => {
  it('creates a key with chosen scopes, shown once, that works with exactly those scopes', async () => {
    const r = await s.request('POST', '/v1/api-keys', { auth: app, body: { scopes: ['events:read'] } });
    expect(r.status, r.text).toBe(201);
    expect(r.json).toMatchObject({ id: expect.any(String), scopes: ['events:read'], revoked_at: null, last_used_at: null });
    expect(r.json.api_key.startsWith(r.json.key_prefix)).toBe(true);
    expect(r.headers.get('cache-control')).toBe('no-store');
    const key = { appId: app.appId, apiKey: r.json.api_key, keyId: r.json.id, ...bearer(app.appId, r.json.api_key) };
    expect((await s.request('GET', '/v1/events', { auth: key })).status).toBe(200);
    expect((await s.request('POST', '/v1/events', { auth: key, body: { event_type: 'k.x', payload: {} } })).status).toBe(403);
    const list = await s.request('GET', '/v1/api-keys', { auth: app });
    expect(JSON.stringify(list.json)).not.toContain(r.json.api_key);
    // The 201 is the key's record as the list shows it, plus its value (its use since is marked
    // off the request's path, so last_used_at is left out).
    const { api_key: _, last_used_at: __, ...created } = r.json;
    const { last_used_at: ___, ...listed } = list.json.data.find((k: { id: string }) => k.id === created.id);
    expect(listed).toEqual(created);
  });

  it('lists every key with its prefix, scopes and when it was last used', async () => {
    const key = await s.createKey(app.appId, ['admin']);
    expect((await s.request('GET', '/v1/api-keys', { auth: key })).status).toBe(200);
    const listed = await eventually(async () => {
      const list = await s.request('GET', '/v1/api-keys', { auth: app });
      const found = list.json.data.find((k: { id: string }) => k.id === key.keyId);
      return found.last_used_at ? found : undefined;
    });
    expect(listed).toMatchObject({ key_prefix: key.apiKey.slice(0, 10), scopes: ['admin'], revoked_at: null });
    expect(Date.now() - Date.parse(listed.last_used_at)).toBeLessThan(60_000);
  });

  it('revokes a key of its own application at once; another application’s key or a bad id is 404', async () => {
    const key = await s.createKey(app.appId, ['events:read']);
    expect((await s.request('GET', '/v1/events', { auth: key })).status).toBe(200);
    const r = await s.request('DELETE', `/v1/api-keys/${key.keyId}`, { auth: app });
    expect(r.status).toBe(204);
    expect((await s.request('GET', '/v1/events', { auth: key })).status).toBe(401);
    expect((await s.request('DELETE', `/v1/api-keys/${key.keyId}`, { auth: app })).status).toBe(404);
    const list = await s.request('GET', '/v1/api-keys', { auth: app });
    expect(list.json.data.find((k: { id: string }) => k.id === key.keyId).revoked_at).toEqual(expect.any(String));

    const other = await s.createApp();
    expect((await s.request('DELETE', `/v1/api-keys/${other.keyId}`, { auth: app })).status).toBe(404);
    expect((await s.request('GET', '/v1/events', { auth: other })).status).toBe(200);
    expect((await s.request('DELETE', '/v1/api-keys/not-a-key', { auth: app })).status).toBe(404);
  });

  it('needs admin, grants no scope the caller lacks, and refuses bad bodies', async () => {
    const reader = await s.createKey(app.appId, ['events:read']);
    expect((await s.request('GET', '/v1/api-keys', { auth: reader })).status).toBe(403);
    const admin = await s.createKey(app.appId, ['admin']);
    const beyond = await s.request('POST', '/v1/api-keys', { auth: admin, body: { scopes: ['admin', 'events:write'] } });
    expect(beyond.status).toBe(403);
    expect(beyond.json.error.message).toMatch(/events:write/);
    for (const body of [
      {},
      { scopes: [] },
      { scopes: ['root'] },
      { scopes: ['admin'], extra: 1 },
      { scopes: Array(10_000).fill('admin') },
    ]) {
      expect((await s.request('POST', '/v1/api-keys', { auth: app, body })).status, JSON.stringify(body)).toBe(400);
    }
    const [{ n }] = await s.deps
      .sql`SELECT count(*)::int AS n FROM api_keys WHERE app_id = ${app.appId} AND 'events:write' = ANY(scopes) AND NOT ('users:read' = ANY(scopes))`;
    expect(n).toBe(0);
  });
});

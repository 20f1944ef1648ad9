import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../../src/auth/api-keys.js';
import { freePort, spawnService, startTestStack, type AppCredentials, type ChildService, type TestStack } from '../helpers/stack.js';
import { apiFetch } from '../helpers/openapi-contract.js';

let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;

beforeAll(async () => {
  s = await startTestStack({ workers: false });
  a = await s.createApp();
  b = await s.createApp();
});
afterAll(() => s.close());

/** The plain JSON error body of docs/architecture.md, with the code the cause maps to. */
function expectError(r: { status: number; headers: Headers; json: any }, status: number, code: string) {
  expect(r.status).toBe(status);
  expect(r.headers.get('content-type')).toMatch(/^application\/json/);
  expect(r.json).toEqual({ error: { code, message: expect.any(String) } });
  expect(r.json.error.message.length).toBeGreaterThan(5);
}

describe('REST auth', () => {
  it('accepts a valid key with the matching X-Service-App-ID', async () => {
    const r = await s.request('GET', '/v1/events', { auth: a });
    expect(r.status).toBe(200);
  });

  it('answers 401 UNAUTHORIZED for every missing or wrong credential', async () => {
    const cases: [string, Record<string, string>][] = [
      ['no headers', {}],
      ['no Authorization', { 'X-Service-App-ID': a.appId }],
      ['not a Bearer token', { Authorization: `Basic ${Buffer.from('x:y').toString('base64')}`, 'X-Service-App-ID': a.appId }],
      ['unknown key', { Authorization: 'Bearer gw_not-a-real-key', 'X-Service-App-ID': a.appId }],
      ['missing app header', { Authorization: `Bearer ${a.apiKey}` }],
      ["another application's id", { Authorization: `Bearer ${a.apiKey}`, 'X-Service-App-ID': b.appId }],
      ['an app id that is not a uuid', { Authorization: `Bearer ${a.apiKey}`, 'X-Service-App-ID': 'nope' }],
    ];
    for (const [name, headers] of cases) {
      const r = await s.request('GET', '/v1/events', { headers });
      expect(r.status, name).toBe(401);
      expectError(r, 401, 'UNAUTHORIZED');
    }
  });

  it('answers 403 FORBIDDEN for a valid key without the needed scope', async () => {
    const readOnly = await s.createKey(a.appId, ['events:read']);
    expect((await s.request('GET', '/v1/events', { auth: readOnly })).status).toBe(200);
    const r = await s.request('POST', '/v1/events', { auth: readOnly, body: { event_type: 'x.y', payload: {} } });
    expectError(r, 403, 'FORBIDDEN');
    expect(r.json.error.message).toContain('events:write');
    const noAdmin = await s.request('GET', '/v1/event-schemas', { auth: readOnly });
    expectError(noAdmin, 403, 'FORBIDDEN');
  });

  it('checks credentials before the body, so a bad body without a key is still a 401', async () => {
    const r = await s.request('POST', '/v1/events', { body: { nonsense: true } });
    expectError(r, 401, 'UNAUTHORIZED');
  });

  it('stops accepting a revoked key on the next request', async () => {
    const k = await s.createKey(a.appId, ['events:read']);
    expect((await s.request('GET', '/v1/events', { auth: k })).status).toBe(200);
    expect(await revokeApiKey(s.deps.sql, k.keyId)).toBe(true);
    expectError(await s.request('GET', '/v1/events', { auth: k }), 401, 'UNAUTHORIZED');
    // The application's other keys are untouched.
    expect((await s.request('GET', '/v1/events', { auth: a })).status).toBe(200);
  });
});

describe('GraphQL auth', () => {
  const query = '{ events(first: 1) { edges { cursor } } }';

  it('answers 401 as plain JSON before the GraphQL layer when the key or app header is wrong', async () => {
    for (const path of ['/graphql', '/']) {
      const noKey = await s.request('POST', path, { body: { query } });
      expectError(noKey, 401, 'UNAUTHORIZED');
      const wrongApp = await s.request('POST', path, {
        body: { query },
        headers: { Authorization: `Bearer ${a.apiKey}`, 'X-Service-App-ID': b.appId },
      });
      expectError(wrongApp, 401, 'UNAUTHORIZED');
    }
  });

  it('reports a missing scope with extensions.code FORBIDDEN', async () => {
    const writeOnly = await s.createKey(a.appId, ['events:write']);
    const r = await s.gql(writeOnly, query);
    expect(r.json.data ?? null).toBeNull();
    expect(r.json.errors[0].extensions.code).toBe('FORBIDDEN');
    const ok = await s.gql(a, query);
    expect(ok.status).toBe(200);
    expect(ok.json.errors).toBeUndefined();
  });
});

describe('revocation across processes', () => {
  let webs: ChildService[] = [];
  afterAll(async () => {
    for (const w of webs) w.kill('SIGKILL');
    await Promise.all(webs.map((w) => w.exited));
  });

  it('a revoked key stops working at once in two separate web processes', async () => {
    const ports = [await freePort(), await freePort()];
    webs = ports.map((port) => spawnService('src/web.ts', { ...s.env, PORT: String(port), LOG_LEVEL: 'info' }));
    await Promise.all(webs.map((w) => w.waitFor(/web listening/)));
    const k = await s.createKey(a.appId, ['events:read']);
    const get = (port: number) => apiFetch(`http://127.0.0.1:${port}/v1/events`, { headers: k.headers });
    // Both processes have served the key (and would have cached it, if anything cached).
    for (const port of ports) expect((await get(port)).status).toBe(200);
    for (const port of ports) expect((await get(port)).status).toBe(200);
    expect(await revokeApiKey(s.deps.sql, k.keyId)).toBe(true);
    for (const port of ports) {
      const r = await get(port);
      expect(r.status).toBe(401);
      expect((await r.json()).error.code).toBe('UNAUTHORIZED');
    }
  });
});

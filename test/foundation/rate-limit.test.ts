import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, spawnService, startTestStack, type AppCredentials, type ChildService, type TestStack } from '../helpers/stack.js';
import { apiFetch } from '../helpers/openapi-contract.js';

const LIMIT = 6;
let s: TestStack;
let webs: ChildService[] = [];
let ports: number[] = [];

beforeAll(async () => {
  // The in-process stack provides the database, Redis prefix and credentials; the two web
  // processes under test share its environment, so they share one Redis budget.
  s = await startTestStack({ workers: false, env: { RATE_LIMIT_PER_MINUTE: String(LIMIT) } });
  ports = [await freePort(), await freePort()];
  webs = ports.map((port) => spawnService('src/web.ts', { ...s.env, PORT: String(port), LOG_LEVEL: 'info' }));
  await Promise.all(webs.map((w) => w.waitFor(/web listening/)));
});
afterAll(async () => {
  for (const w of webs) w.kill('SIGKILL');
  await Promise.all(webs.map((w) => w.exited));
  await s.close();
});

const get = (port: number, auth: AppCredentials, path = '/v1/events') =>
  apiFetch(`http://127.0.0.1:${port}${path}`, { headers: auth.headers });

describe('rate limit', () => {
  it('two web processes draw on one per-application budget and answer 429 with Retry-After and RateLimit-* headers', async () => {
    const a = await s.createApp();
    const remaining: number[] = [];
    for (let i = 0; i < LIMIT; i++) {
      const r = await get(ports[i % 2], a);
      expect(r.status, `request ${i + 1}`).toBe(200);
      expect(r.headers.get('ratelimit-limit')).toBe(String(LIMIT));
      remaining.push(Number(r.headers.get('ratelimit-remaining')));
    }
    // One budget: the count went down across both processes, not per process.
    expect(remaining).toEqual([5, 4, 3, 2, 1, 0]);
    for (const port of ports) {
      const r = await get(port, a);
      expect(r.status).toBe(429);
      const retryAfter = Number(r.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(r.headers.get('ratelimit-limit')).toBe(String(LIMIT));
      expect(r.headers.get('ratelimit-remaining')).toBe('0');
      expect(Number(r.headers.get('ratelimit-reset'))).toBeGreaterThanOrEqual(1);
      expect(await r.json()).toEqual({ error: { code: 'RATE_LIMITED', message: expect.any(String) } });
    }
    // GraphQL spends the same budget.
    const g = await fetch(`http://127.0.0.1:${ports[0]}/graphql`, {
      method: 'POST',
      headers: { ...a.headers, 'Content-Type': 'application/json' },
      body: JSON.stringify({ query: '{ events(first: 1) { edges { cursor } } }' }),
    });
    expect(g.status).toBe(429);
  });

  it('counts each application separately', async () => {
    const a = await s.createApp();
    const b = await s.createApp();
    for (let i = 0; i < LIMIT; i++) expect((await get(ports[i % 2], a)).status).toBe(200);
    expect((await get(ports[0], a)).status).toBe(429);
    expect((await get(ports[1], b)).status).toBe(200);
  });

  it('does not spend the budget on unauthenticated requests or operations routes', async () => {
    const a = await s.createApp();
    for (let i = 0; i < LIMIT * 2; i++) {
      expect((await apiFetch(`http://127.0.0.1:${ports[i % 2]}/v1/events`)).status).toBe(401);
      expect((await fetch(`http://127.0.0.1:${ports[i % 2]}/healthz`)).status).toBe(200);
    }
    const r = await get(ports[0], a);
    expect(r.status).toBe(200);
    expect(r.headers.get('ratelimit-remaining')).toBe(String(LIMIT - 1));
  });

  it('exempts the event stream once the budget is spent', async () => {
    const a = await s.createApp();
    for (let i = 0; i < LIMIT; i++) expect((await get(ports[i % 2], a)).status).toBe(200);
    expect((await get(ports[0], a)).status).toBe(429);
    for (const port of ports) {
      const abort = new AbortController();
      const r = await apiFetch(`http://127.0.0.1:${port}/events/stream`, { headers: a.headers, signal: abort.signal });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^text\/event-stream/);
      abort.abort();
      await r.body?.cancel().catch(() => {});
    }
  });

  it('exempts the inbound platform webhook routes', async () => {
    // An unknown connection is refused by the receiver itself (its own 401 body), never by the API budget.
    for (let i = 0; i < LIMIT * 2; i++) {
      const r = await fetch(`http://127.0.0.1:${ports[i % 2]}/webhooks/00000000-0000-4000-8000-000000000000/secret`, {
        method: 'POST',
        body: '{}',
      });
      expect(r.status).toBe(401);
      expect(await r.json()).toEqual({ error: { code: 'UNAUTHORIZED', message: 'unknown webhook' } });
      expect(r.headers.get('ratelimit-limit')).toBeNull();
    }
  });
});

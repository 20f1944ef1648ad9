import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { startTestStack, type TestStack } from '../helpers/stack.js';

let s: TestStack;
let proxied: TestStack;

beforeAll(async () => {
  // Minute windows: a test's few requests all fall in the first one, however loaded the machine.
  s = await startTestStack({ workers: false, env: { INBOUND_PER_SOURCE_PER_MINUTE: '5', INBOUND_HANDSHAKE_PER_SOURCE_PER_MINUTE: '2' } });
  proxied = await startTestStack({ workers: false, env: { INBOUND_PER_SOURCE_PER_MINUTE: '3', TRUST_PROXY: 'loopback' } });
});
afterAll(async () => {
  await s?.close();
  await proxied?.close();
});

const post = (stack: TestStack, path: string, headers: Record<string, string> = {}) =>
  fetch(stack.base + path, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: '{}' });

describe('unauthenticated inbound paths are rate-limited per source address', () => {
  it('answers 429 with Retry-After once one address has spent its budget on /webhooks/*', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await post(s, `/webhooks/00000000-0000-4000-8000-00000000000${i}/wrong-secret`)).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401]);
    const limited = await post(s, '/webhooks/00000000-0000-4000-8000-000000000009/wrong-secret');
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // Another path under /webhooks, and a spoofed X-Forwarded-For without TRUST_PROXY, draw on the same budget.
    expect((await fetch(`${s.base}/webhooks/messenger?hub.mode=subscribe`)).status).toBe(429);
    expect((await post(s, '/webhooks/x/y', { 'X-Forwarded-For': '203.0.113.7' })).status).toBe(429);
    // The API is not an inbound path: its own limits apply.
    expect((await fetch(`${s.base}/healthz`)).status).toBe(200);
  });

  it('counts sources by X-Forwarded-For only when TRUST_PROXY names the proxy', async () => {
    for (let i = 0; i < 3; i++) expect((await post(proxied, '/webhooks/a/b', { 'X-Forwarded-For': '203.0.113.10' })).status).toBe(401);
    expect((await post(proxied, '/webhooks/a/b', { 'X-Forwarded-For': '203.0.113.10' })).status).toBe(429);
    expect((await post(proxied, '/webhooks/a/b', { 'X-Forwarded-For': '203.0.113.11' })).status).toBe(401);
  });

  it('keeps the default per-source budget above what one connection may legitimately deliver', () => {
    const defaults = parseConfig({});
    expect(defaults.INBOUND_PER_SOURCE_PER_MINUTE).toBeGreaterThanOrEqual(defaults.INBOUND_FLOOD_PER_SECOND * 60);
    expect(defaults.TRUST_PROXY).toBe(false);
  });
});

describe('the Meta verification handshake has its own, tighter per-source budget', () => {
  it('answers 429 to the third handshake of one address in a minute', async () => {
    const other = await startTestStack({ workers: false, env: { INBOUND_HANDSHAKE_PER_SOURCE_PER_MINUTE: '2' } });
    try {
      const hs = () => fetch(`${other.base}/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=guess&hub.challenge=c`);
      expect((await hs()).status).toBe(403);
      expect((await hs()).status).toBe(403);
      const limited = await hs();
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    } finally {
      await other.close();
    }
  });
});

import { queueFor } from '../../src/queues.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type TestStack } from '../helpers/stack.js';

let s: TestStack;
let basic: string;
let bearer: string;

beforeAll(async () => {
  s = await startTestStack({ workers: false });
  basic = `Basic ${Buffer.from(`admin:${s.config.ADMIN_TOKEN}`).toString('base64')}`;
  bearer = `Bearer ${s.config.ADMIN_TOKEN}`;
});
afterEach(() => queueFor(s.deps.queues, 'webhook').resume());
afterAll(() => s?.close());

/** A mutating Bull Board call: pauses the webhook queue. */
const pause = (headers: Record<string, string>) => fetch(`${s.base}/admin/queues/api/queues/webhook/pause`, { method: 'PUT', headers });
const paused = () => queueFor(s.deps.queues, 'webhook').isPaused();

describe('Bull Board mutations are not reachable cross-site with cached Basic credentials', () => {
  it.each([
    ['a cross-site Origin', { Origin: 'https://evil.example' }],
    ['Sec-Fetch-Site: cross-site', { 'Sec-Fetch-Site': 'cross-site', Origin: 'https://evil.example' }],
    ['Sec-Fetch-Site: same-site (another port of the host)', { 'Sec-Fetch-Site': 'same-site' }],
    ['no Origin nor Sec-Fetch-Site at all', {}],
  ])('refuses a Basic-authenticated PUT with %s (403) and changes nothing', async (_name, headers) => {
    const r = await pause({ Authorization: basic, ...headers });
    expect(r.status).toBe(403);
    expect((await r.json()).error.code).toBe('FORBIDDEN');
    expect(await paused()).toBe(false);
  });

  it('lets the same PUT through with the Bearer token, whatever the Origin', async () => {
    const r = await pause({ Authorization: bearer, Origin: 'https://evil.example' });
    expect(r.status).toBe(200);
    expect(await paused()).toBe(true);
  });

  it('lets a Basic-authenticated PUT through when it comes from the board itself (same origin)', async () => {
    expect((await pause({ Authorization: basic, 'Sec-Fetch-Site': 'same-origin', Origin: s.base })).status).toBe(200);
    await queueFor(s.deps.queues, 'webhook').resume();
    expect((await pause({ Authorization: basic, Origin: s.base })).status).toBe(200);
    expect(await paused()).toBe(true);
  });

  it('still lets Basic credentials read (GET) without an Origin', async () => {
    expect((await fetch(`${s.base}/admin/queues/api/queues`, { headers: { Authorization: basic } })).status).toBe(200);
  });
});

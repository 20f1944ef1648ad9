import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QUEUE_NAMES } from '../../src/queues.js';
import { launchChromium } from '../helpers/chromium.js';
import { startTestStack, type TestStack } from '../helpers/stack.js';

let s: TestStack;
let browser: Browser;

beforeAll(async () => {
  s = await startTestStack({ workers: false });
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await s.close();
});

describe('Bull Board at /admin/queues', () => {
  it('refuses a request without ADMIN_TOKEN, or with a wrong one, with a JSON 401', async () => {
    for (const headers of [
      {} as Record<string, string>,
      { Authorization: 'Bearer wrong-token-0123456789' },
      { Authorization: `Basic ${Buffer.from('admin:nope').toString('base64')}` },
    ]) {
      const r = await fetch(`${s.base}/admin/queues`, { headers });
      expect(r.status).toBe(401);
      expect(r.headers.get('www-authenticate')).toMatch(/^Basic /);
      expect((await r.json()).error.code).toBe('UNAUTHORIZED');
    }
    // The board's API behind the page is guarded too.
    expect((await fetch(`${s.base}/admin/queues/api/queues`)).status).toBe(401);
    // An application's API key is not an admin token.
    const app = await s.createApp();
    expect((await fetch(`${s.base}/admin/queues`, { headers: { Authorization: `Bearer ${app.apiKey}` } })).status).toBe(401);
  });

  it('answers the API behind the page with every queue for the admin token', async () => {
    const r = await fetch(`${s.base}/admin/queues/api/queues`, { headers: { Authorization: `Bearer ${s.config.ADMIN_TOKEN}` } });
    expect(r.status).toBe(200);
    const names = ((await r.json()).queues as { name: string }[]).map((q) => q.name).sort();
    expect(names).toEqual([...QUEUE_NAMES].sort());
  });

  it('renders the dashboard listing every queue in headless Chromium', async () => {
    const context = await browser.newContext({
      httpCredentials: { username: 'admin', password: s.config.ADMIN_TOKEN },
      viewport: { width: 1280, height: 900 },
    });
    try {
      const page = await context.newPage();
      const response = await page.goto(`${s.base}/admin/queues`);
      expect(response?.status()).toBe(200);
      // The board is a client-side app: wait until it has fetched and drawn every queue.
      for (const name of QUEUE_NAMES) {
        await page.getByText(name, { exact: true }).first().waitFor({ timeout: 20_000 });
      }
      await page.getByText('Loading...').first().waitFor({ state: 'hidden', timeout: 20_000 });
      const shot = await page.screenshot({ fullPage: true, path: 'test-artifacts/bull-board.png' });
      expect(shot.subarray(1, 4).toString()).toBe('PNG');
      expect(shot.length).toBeGreaterThan(10_000);
      const text = await page.locator('body').textContent();
      for (const name of QUEUE_NAMES) expect(text).toContain(name);
    } finally {
      await context.close();
    }
  });

  it('does not let the browser in without the token or with a wrong one', async () => {
    for (const httpCredentials of [undefined, { username: 'admin', password: 'wrong-token-0123456789' }]) {
      const context = await browser.newContext({ httpCredentials });
      try {
        const page = await context.newPage();
        // Chromium either shows the 401 or gives up on the Basic challenge; never the board.
        const outcome = await page.goto(`${s.base}/admin/queues`).then(
          (r) => r?.status(),
          (err: Error) => (/ERR_INVALID_AUTH_CREDENTIALS/.test(err.message) ? 'refused' : err.message),
        );
        expect([401, 'refused']).toContain(outcome);
        if (outcome === 401) expect(await page.locator('body').textContent()).not.toContain('transcription');
      } finally {
        await context.close();
      }
    }
  });
});

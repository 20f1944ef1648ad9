import { queueFor } from '../../src/queues.js';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
  await s?.close();
});

const paused = () => queueFor(s.deps.queues, 'webhook').isPaused();

describe('Bull Board in a browser logged in with Basic credentials', () => {
  it('lets the logged-in board page in Chromium make its own mutating fetch', async () => {
    const context = await browser.newContext({ httpCredentials: { username: 'admin', password: s.config.ADMIN_TOKEN } });
    try {
      const page = await context.newPage();
      expect((await page.goto(`${s.base}/admin/queues`))?.status()).toBe(200);
      const status = await page.evaluate(async () => (await fetch('/admin/queues/api/queues/webhook/pause', { method: 'PUT' })).status);
      expect(status).toBe(200);
      expect(await paused()).toBe(true);
    } finally {
      await context.close();
    }
  });
});

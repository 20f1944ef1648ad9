import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium } from '../helpers/chromium.js';
import { apiFetch } from '../helpers/openapi-contract.js';
import { type AppCredentials, startTestStack, type TestStack } from '../helpers/stack.js';

/**
 * The API reference (/docs) and the GraphQL explorer (/graphql in a browser), driven in
 * Debian's Chromium against the real service: each loads from this origin alone, shows what the
 * API has, and logs no console error.
 */

let s: TestStack;
let app: AppCredentials;
let browser: Browser;

beforeAll(async () => {
  s = await startTestStack();
  app = await s.createApp();
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await s?.close();
});

/** A fresh page that records every request it makes and every console error or page error. */
async function watchedPage(): Promise<{ context: BrowserContext; page: Page; requested: string[]; problems: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  context.setDefaultTimeout(20_000);
  const requested: string[] = [];
  const problems: string[] = [];
  // Anything not for this service is refused before it leaves the machine, and remembered.
  await context.route('**/*', (route) => {
    const url = route.request().url();
    requested.push(url);
    return url.startsWith(`${s.base}/`) || url.startsWith('blob:') || url.startsWith('data:') ? route.continue() : route.abort();
  });
  const page = await context.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  return { context, page, requested, problems };
}

const offOrigin = (requested: string[]) => requested.filter((u) => !u.startsWith(`${s.base}/`) && !/^(blob|data):/.test(u));

describe('/docs', () => {
  it('renders every operation of the live OpenAPI document from this origin, with no console error', { timeout: 150_000 }, async () => {
    const doc = (await (await apiFetch(`${s.base}/v1/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { operationId: string }>>;
      tags: { name: string }[];
    };
    const operationIds = Object.values(doc.paths).flatMap((methods) => Object.values(methods).map((o) => o.operationId));
    expect(operationIds.length).toBeGreaterThan(40);

    const { context, page, requested, problems } = await watchedPage();
    try {
      const answer = await page.goto(`${s.base}/docs`);
      expect(answer?.status()).toBe(200);
      const csp = answer?.headers()['content-security-policy'] ?? '';
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toMatch(/script-src[^;]*unsafe/);
      // Redoc gives each operation a section whose id names its tag and operationId.
      // Redoc lays out the whole document before it shows any of it: tens of seconds on a busy CI machine.
      await page.locator(`[data-section-id$="/operation/${operationIds[0]}"]`).first().waitFor({ state: 'attached', timeout: 90_000 });
      const rendered = await page
        .locator('[data-section-id*="/operation/"]')
        .evaluateAll((els) => els.map((e) => (e.getAttribute('data-section-id') ?? '').replace(/^(tag\/[^/]+\/)?operation\//, '')));
      expect(new Set(rendered).size).toBeGreaterThanOrEqual(operationIds.length);
      for (const id of operationIds) expect(rendered).toContain(id);
      // Each tag's description is on the page, as the document gives it.
      for (const tag of doc.tags) await page.locator(`[data-section-id="tag/${tag.name}"]`).first().waitFor({ state: 'attached' });
      expect(problems).toEqual([]);
      expect(offOrigin(requested)).toEqual([]);
    } finally {
      await context.close();
    }
  });
});

describe('/graphql in a browser', () => {
  it('answers API clients as before: GET with a JSON Accept, and POST, stay GraphQL over HTTP', async () => {
    const q = encodeURIComponent('{ __typename }');
    for (const accept of ['application/graphql-response+json', 'application/json', '*/*']) {
      const r = await fetch(`${s.base}/graphql?query=${q}`, { headers: { ...app.headers, Accept: accept } });
      expect(r.status, accept).toBe(200);
      expect(await r.json()).toEqual({ data: { __typename: 'Query' } });
    }
    // Without a key, a client (not a browser) is refused as before.
    const anonymous = await fetch(`${s.base}/graphql?query=${q}`, { headers: { Accept: 'application/json' } });
    expect(anonymous.status).toBe(401);
    expect((await s.gql(app, '{ __typename }')).json).toEqual({ data: { __typename: 'Query' } });
    // A browser's Accept gets the page, with the strict script policy.
    const html = await fetch(`${s.base}/graphql`, { headers: { Accept: 'text/html,application/xhtml+xml,*/*;q=0.8' } });
    expect(html.status).toBe(200);
    expect(html.headers.get('content-type')).toMatch(/^text\/html/);
    expect(html.headers.get('content-security-policy')).toContain("script-src 'self'");
  });

  it('runs a query with the key typed into its Headers tab, from this origin, with no console error', { timeout: 90_000 }, async () => {
    const created = await s.request('POST', '/v1/events', { auth: app, body: { event_type: 'explorer.checked', payload: { n: 1 } } });
    expect(created.status).toBe(201);

    const { context, page, requested, problems } = await watchedPage();
    try {
      await page.goto(`${s.base}/graphql`);
      // Before a key is typed nothing is sent: running the query answers with the hint.
      const run = page.locator('.graphiql-execute-button');
      await run.click();
      const result = page.locator('.result-window');
      await result.getByText('Type your API key').waitFor();

      // The Headers tab is open at start; replace its template with the key, as a person types it.
      const headersEditor = page.locator('.graphiql-editor-tool .graphiql-editor').last();
      await headersEditor.click();
      await page.keyboard.press('ControlOrMeta+a');
      await page.keyboard.press('Delete');
      await page.keyboard.insertText(JSON.stringify({ Authorization: `Bearer ${app.apiKey}`, 'X-Service-App-ID': app.appId }));
      await run.click();
      await result.getByText('explorer.checked').waitFor();
      expect(problems).toEqual([]);
      expect(offOrigin(requested)).toEqual([]);
      // The explorer's own files come from this service.
      expect(requested.some((u) => u.startsWith(`${s.base}/graphql/explorer/ruru.js`))).toBe(true);
    } finally {
      await context.close();
    }
  });
});

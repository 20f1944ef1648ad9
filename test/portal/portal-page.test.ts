import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as connectNats } from '@nats-io/transport-node';
import { connect, type ChannelModel, type ConsumeMessage } from 'amqplib';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { SCOPES } from '../../src/auth/scopes.js';
import { writeEvents } from '../../src/ledger/write.js';
import { FakeServer } from '../fakes/fake-server.js';
import { TelegramFake } from '../fakes/telegram.js';
import { launchChromium } from '../helpers/chromium.js';
import { type AppCredentials, startTestStack, type TestStack } from '../helpers/stack.js';

/**
 * The developer portal driven as a person would, in Debian's Chromium against the real service
 * (the built page under /portal, the public API, the stream). Each area is screenshotted at a
 * desktop and a phone width into docs/portal/ and checked with axe-core.
 */

const require = createRequire(import.meta.url);
const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const SIZES = { desktop: { width: 1280, height: 800 }, narrow: { width: 390, height: 844 } } as const;

let s: TestStack;
let app: AppCredentials;
let browser: Browser;
let telegram: TelegramFake;
let receiverFails = true;
let receiver: FakeServer;
/** The Telegram connection the connections test creates through the page. */
let connectionId: string;
/** One signed-in page shared by the area tests, as one developer would move through the portal. */
let context: BrowserContext;
let page: Page;
/** Every address the shared page requested: the portal must work with no internet. */
const requested = new Set<string>();

beforeAll(async () => {
  // Three quick attempts, so a failing receiver's whole schedule plays out while the test
  // watches; streams that end every few seconds, so the page's resume is exercised throughout.
  // The areas share one application, and a fast machine moves through them (the sandbox chat
  // reloads its conversation on every event) in well under the minute the API's per-application
  // limit counts: a limit this file does not test must not decide it (test/foundation/rate-limit.test.ts does).
  s = await startTestStack({
    env: { WEBHOOK_RETRY_DELAYS_MS: '0,300,300', WEBHOOK_TIMEOUT_MS: '2000', STREAM_MAX_MS: '3000', RATE_LIMIT_PER_MINUTE: '1000' },
  });
  // A readable name for the screenshots.
  const acme = await createApplication(s.deps.sql, 'Acme Shop', [...SCOPES]);
  app = {
    appId: acme.appId,
    apiKey: acme.apiKey,
    keyId: acme.keyId,
    headers: { Authorization: `Bearer ${acme.apiKey}`, 'X-Service-App-ID': acme.appId },
  };
  browser = await launchChromium();
  telegram = await TelegramFake.start();
  receiver = await FakeServer.start(() => (receiverFails ? { status: 503, body: 'receiver down' } : { status: 200, body: 'ok' }));
  context = await newContext();
  context.on('request', (r) => requested.add(r.url()));
  page = await context.newPage();
});
afterAll(async () => {
  await context?.close();
  await browser?.close();
  await receiver?.close();
  await telegram?.close();
  await s?.close();
});

/** A browser context whose pages carry axe-core (an init script, which the portal's CSP allows, unlike an injected tag). */
async function newContext(): Promise<BrowserContext> {
  const ctx = await browser.newContext({ viewport: SIZES.desktop });
  await ctx.addInitScript({ content: AXE_SOURCE });
  // Under the 30 s test timeout, so a missing element fails with its own message.
  ctx.setDefaultTimeout(10_000);
  return ctx;
}

/** A sign-in link from the API, pointed at this test's server (its path and fragment are what matter). */
async function signInLink(body: Record<string, unknown> = {}): Promise<string> {
  const r = await s.request('POST', '/v1/portal/sessions', { auth: app, body });
  expect(r.status).toBe(201);
  const url = new URL(r.json.url);
  return `${s.base}${url.pathname}${url.search}${url.hash}`;
}

/** No serious or critical axe-core violation on the page as it is now. */
async function expectAccessible(p: Page, area: string): Promise<void> {
  const violations = await p.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: { run(ctx: Document): Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }> };
      }
    ).axe;
    const result = await axe.run(document);
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n) => n.target.join(' ')).slice(0, 3) }));
  });
  expect(
    violations.filter((v) => v.impact === 'serious' || v.impact === 'critical'),
    `${area}: ${JSON.stringify(violations)}`,
  ).toEqual([]);
}

/** Screenshots at both widths (docs/portal/<area>-<size>.png), each checked for accessibility. */
async function capture(p: Page, area: string): Promise<void> {
  for (const [size, viewport] of Object.entries(SIZES)) {
    await p.setViewportSize(viewport);
    await expectAccessible(p, `${area} at ${size}`);
    const shot = await p.screenshot({ path: `docs/portal/${area}-${size}.png` });
    expect(shot.subarray(1, 4).toString()).toBe('PNG');
  }
  await p.setViewportSize(SIZES.desktop);
}

describe('the developer portal', () => {
  it('signs in with a session URL and shows a custom event live in under a second', async () => {
    await page.goto(await signInLink({ theme: { accent_color: '#0f766e' } }));
    await page.getByRole('navigation', { name: 'Portal areas' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/portal/live');
    // The one-time token does not stay in the address bar.
    expect(page.url()).not.toContain('token=');
    await page.getByTestId('stream-state').getByText('Live').waitFor();

    // POST /v1/events answers once the ledger has committed the event: from then, under a second.
    const created = await s.request('POST', '/v1/events', { auth: app, body: { event_type: 'order.created', payload: { order: 1 } } });
    expect(created.status).toBe(201);
    const committed = Date.now();
    await page.locator('[data-event-type="order.created"]').first().waitFor();
    expect(Date.now() - committed).toBeLessThan(1_000);

    await page.locator('[data-event-type="order.created"]').first().click();
    await page.getByRole('heading', { name: 'order.created' }).waitFor();
    await page.getByText('"order": 1').waitFor();
    await capture(page, 'live-events');
  });

  it('filters the live stream by event type pattern', async () => {
    await page.getByLabel('Event types').fill('order.[');
    await page.getByText('never closed').waitFor();
    expect(await page.getByRole('button', { name: 'Apply filter' }).isDisabled()).toBe(true);
    await page.getByLabel('Event types').fill('order.*');
    await page.getByRole('button', { name: 'Apply filter' }).click();
    await page.getByTestId('stream-state').getByText('Live').waitFor();
    for (const event_type of ['invoice.paid', 'order.shipped'])
      expect((await s.request('POST', '/v1/events', { auth: app, body: { event_type, payload: {} } })).status).toBe(201);
    // The stream is in ledger order: once order.shipped is shown, invoice.paid would have been too.
    await page.locator('[data-event-type="order.shipped"]').waitFor();
    expect(await page.locator('[data-event-type="invoice.paid"]').count()).toBe(0);

    // Paused, the list holds new events back and says how many; resumed, it shows them.
    await page.getByRole('button', { name: 'Pause' }).click();
    expect((await s.request('POST', '/v1/events', { auth: app, body: { event_type: 'order.held', payload: {} } })).status).toBe(201);
    await page.getByText('1 new while paused').waitFor();
    expect(await page.locator('[data-event-type="order.held"]').count()).toBe(0);
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.locator('[data-event-type="order.held"]').waitFor();
  });

  it('resumes the stream from its last cursor each time it ends, losing and repeating nothing', async () => {
    // The stack ends every stream after STREAM_MAX_MS; the page reopens it from its cursor.
    const resumed = async () =>
      Number(
        (await page
          .getByTestId('reconnects')
          .textContent({ timeout: 100 })
          .catch(() => '0')) ?? 0,
      );
    const types = ['order.before_cut', 'order.after_cut'];
    const before = await resumed();
    expect((await s.request('POST', '/v1/events', { auth: app, body: { event_type: types[0], payload: {} } })).status).toBe(201);
    await expect.poll(resumed, { timeout: 10_000 }).toBeGreaterThan(before);
    expect((await s.request('POST', '/v1/events', { auth: app, body: { event_type: types[1], payload: {} } })).status).toBe(201);
    await page.locator(`[data-event-type="${types[1]}"]`).waitFor();
    await page.getByTestId('stream-state').getByText('Live').waitFor();
    // Resuming without the cursor would start again with a backfill of recent events: doubles.
    for (const type of [...types, 'order.shipped']) expect(await page.locator(`[data-event-type="${type}"]`).count(), type).toBe(1);
  });

  it("creates a webhook, shows a failing receiver's attempts, and replays once it is fixed", async () => {
    await page.getByRole('link', { name: 'Webhooks' }).click();
    await page.getByRole('button', { name: 'New webhook' }).click();
    await page.getByLabel('Name', { exact: true }).fill('orders');
    await page.getByLabel('Endpoint URL').fill(`${receiver.url}/hooks`);
    await page.getByLabel('Event patterns').fill('order.[');
    await page.getByText('never closed').waitFor();
    await page.getByLabel('Event patterns').fill('order.*');
    await page.getByRole('button', { name: 'Create webhook' }).click();
    const secret = await page.getByTestId('secret').textContent();
    expect(secret?.length).toBeGreaterThanOrEqual(16);
    await capture(page, 'webhooks');
    await page.getByRole('link', { name: 'Open orders' }).click();
    await page.getByRole('heading', { name: 'orders' }).waitFor();
    await page.getByRole('button', { name: 'Send test event' }).click();
    await page.getByText('Test event failed: 503').waitFor();
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const rotated = await page.getByTestId('secret').textContent();
    expect(rotated).not.toBe(secret);
    await page.getByText(/previous secret keeps signing beside it until/).waitFor();
    await page.getByRole('button', { name: 'Pause' }).click();
    await page.locator('.heading .badge', { hasText: 'PAUSED' }).waitFor();
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.locator('.heading .badge', { hasText: 'ACTIVE' }).waitFor();
    // Edited in place: patterns and throttle change, the secret and the attempt log stay.
    await page.getByRole('button', { name: 'Edit' }).click();
    const form = page.getByRole('form', { name: 'Edit webhook' });
    expect(await form.getByLabel('Event patterns').inputValue()).toBe('order.*');
    await form.getByLabel('Event patterns').fill('order.*, refund.*');
    // Above the service's limit (10,000) the form says so and does not submit.
    await form.getByLabel('Deliveries per second at most').fill('10001');
    await form.getByText('a whole number from 1 to 10000, or empty').waitFor();
    expect(await form.getByRole('button', { name: 'Save changes' }).isDisabled()).toBe(true);
    await form.getByLabel('Deliveries per second at most').fill('50');
    await form.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText('Saved.').waitFor();
    await page.getByText('50 deliveries per second at most').waitFor();
    const subId = page.url().split('/').pop()!;
    const edited = await s.request('GET', `/v1/webhook-subscriptions/${subId}`, { auth: app });
    expect(edited.json).toMatchObject({ name: 'orders', event_patterns: ['order.*', 'refund.*'], max_per_second: 50 });

    const before = new Date().toISOString();
    expect((await s.request('POST', '/v1/events', { auth: app, body: { event_type: 'order.paid', payload: { order: 2 } } })).status).toBe(
      201,
    );
    // The page re-reads the log while open: the three failed attempts show up, then the verdict.
    const delivery = page.locator('.deliveries > li').filter({ hasText: 'order.paid' });
    await delivery.getByText('3 attempts').waitFor({ timeout: 15_000 });
    await delivery.locator('.badge', { hasText: 'failed' }).waitFor();
    await delivery.locator('summary').first().click();
    expect(await delivery.getByTestId('attempt').count()).toBe(3);
    // Newest first, each numbered once, by its own count (no list marker counting rows beside it).
    const attempts = delivery.getByTestId('attempt');
    expect((await attempts.allInnerTexts()).map((t) => t.match(/^Attempt (\d+)/)?.[1])).toEqual(['3', '2', '1']);
    expect(await attempts.first().evaluate((li) => getComputedStyle(li).listStyleType)).toBe('none');
    await delivery.getByText('receiver down').first().waitFor();
    // What the receiver saw: the signed request's headers, as sent.
    await delivery.getByText('Request headers').first().click();
    await delivery
      .getByText(/x-service-signature: (v1,|sha256=)/i)
      .first()
      .waitFor();
    await capture(page, 'webhook-deliveries');

    receiverFails = false;
    await page.getByLabel('Replay events since').fill(before);
    await page.getByRole('button', { name: 'Replay', exact: true }).click();
    await page.getByText(/Replay queued 1 delivery/).waitFor();
    await delivery.locator('.badge', { hasText: 'delivered' }).waitFor({ timeout: 15_000 });
    const ok = receiver.received((r) => r.json?.event_type === 'order.paid');
    expect(ok.length).toBe(4);
  });

  it('creates a Telegram connection against the fake and sends a test message', async () => {
    await page.getByRole('link', { name: 'Connections' }).click();
    await page.getByRole('button', { name: 'New connection' }).click();
    await page.getByLabel('Platform').selectOption('TELEGRAM');
    await page.getByLabel('Name', { exact: true }).fill('support bot');
    await page.getByLabel('Bot token').fill('123456:ABC-portal_test');
    await page.getByLabel('API base URL (optional)').fill(telegram.url);
    await page.getByRole('button', { name: 'Connect', exact: true }).click();
    const hookUrl = await page.getByTestId('webhook-url').textContent();
    expect(hookUrl).toMatch(/\/webhooks\/[0-9a-f-]{36}\//);
    // Secrets are write-only: the page never shows the token again.
    expect(await page.locator('body').textContent()).not.toContain('ABC-portal_test');

    const card = page.locator('li[data-connection-id]').filter({ hasText: 'support bot' });
    connectionId = (await card.getAttribute('data-connection-id'))!;
    await card.getByText('Send a test message').click();
    await card.getByLabel("Recipient's platform id").fill('4242');
    await card.getByLabel('Text').fill('hello from the portal');
    await card.getByRole('button', { name: 'Send' }).click();
    await card.getByText(/Message (sent|queued|accepted)/i).waitFor({ timeout: 15_000 });
    const sent = await telegram.server.waitFor(1, (r) => r.path.endsWith('/sendMessage'));
    expect(sent[0].json ?? sent[0].form).toMatchObject({ chat_id: expect.anything(), text: 'hello from the portal' });
    await capture(page, 'connections');
  });

  it('disables, enables and deletes a connection', async () => {
    const made = await s.request('POST', '/v1/platform-connections', {
      auth: app,
      body: { platform_name: 'TELEGRAM', name: 'spare bot', config: { bot_token: '654321:spare-portal_test', api_base_url: telegram.url } },
    });
    expect(made.status).toBe(201);
    const path = `/v1/platform-connections/${made.json.id}`;
    await page.reload();
    const card = page.locator(`li[data-connection-id="${made.json.id}"]`);
    await card.getByRole('button', { name: 'Disable' }).click();
    await card.locator('.badge', { hasText: 'DISABLED' }).waitFor();
    expect((await s.request('GET', path, { auth: app })).json.status).toBe('DISABLED');
    await card.getByRole('button', { name: 'Enable' }).click();
    await card.locator('.badge', { hasText: 'ACTIVE' }).waitFor();
    expect((await s.request('GET', path, { auth: app })).json.status).toBe('ACTIVE');
    page.once('dialog', (d) => void d.accept());
    await card.getByRole('button', { name: 'Delete' }).click();
    await card.waitFor({ state: 'detached' });
    expect((await s.request('GET', path, { auth: app })).status).toBe(404);
    // The connection the other areas use is untouched.
    expect((await s.request('GET', `/v1/platform-connections/${connectionId}`, { auth: app })).status).toBe(200);
  });

  it('chats with a sandbox connection as the end user and watches the sends reach read', async () => {
    await page.getByRole('button', { name: 'New connection' }).click();
    await page.getByLabel('Platform', { exact: true }).selectOption('SANDBOX');
    await page.getByLabel('Name', { exact: true }).fill('sandbox chat');
    await page.getByLabel('Delivered after ms (optional)').fill('100');
    await page.getByLabel('Read after ms (optional)').fill('300');
    await page.getByRole('button', { name: 'Connect', exact: true }).click();
    const card = page.locator('li[data-connection-id]').filter({ hasText: 'sandbox chat' });
    const id = (await card.getAttribute('data-connection-id'))!;
    expect((await s.request('GET', `/v1/platform-connections/${id}`, { auth: app })).json.config).toEqual({
      delivered_after_ms: 100,
      read_after_ms: 300,
    });
    await card.getByText('Chat as the end user').click();
    const chat = card.getByTestId('sandbox-chat');
    await card.getByLabel('Message', { exact: true }).fill('hi from Ada');
    await card.getByRole('button', { name: 'Send as the user' }).click();
    await chat.locator('li[data-from="user"]', { hasText: 'hi from Ada' }).waitFor({ timeout: 15_000 });
    await card.getByLabel('Message', { exact: true }).fill('hello Ada');
    await card.getByRole('button', { name: 'Send as the app' }).click();
    const sent = chat.locator('li[data-from="app"]', { hasText: 'hello Ada' });
    await sent.locator('.badge', { hasText: 'read' }).waitFor({ timeout: 15_000 });
    // The user's message went through the inbound pipeline: a message.inbound from ada, on this connection.
    const events = await s.request('GET', '/v1/events?event_type=message.inbound', { auth: app });
    expect(
      events.json.data.some(
        (e: { payload: { message: { text: string } }; platform_connection_id: string }) =>
          e.payload.message.text === 'hi from Ada' && e.platform_connection_id === id,
      ),
    ).toBe(true);
  });

  it('pages through the ledger in Explore with a copyable curl line', async () => {
    await page.getByRole('link', { name: 'Explore' }).click();
    await page.getByLabel('Event types').fill('order.*');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByTestId('curl').getByText('/v1/events?event_type=order.*', { exact: false }).waitFor();
    await page.getByRole('button', { name: 'order.paid' }).waitFor();
    // The curl line, run as shown with a key, answers the same page.
    const curl = (await page.getByTestId('curl').textContent())!;
    const url = /curl -s '([^']+)'/.exec(curl)![1];
    const headers = Object.fromEntries(
      [...curl.matchAll(/-H ["']([^:]+): ([^"']+)["']/g)].map((m) => [m[1], m[2].replace('$API_KEY', app.apiKey)]),
    );
    const answer = await fetch(url, { headers });
    expect(answer.status).toBe(200);
    expect(((await answer.json()).data as { event_type: string }[]).map((e) => e.event_type)).toContain('order.paid');
    expect(await page.getByRole('button', { name: 'invoice.paid' }).count()).toBe(0);
    // An event's detail names the deliveries it caused.
    await page.getByRole('button', { name: 'order.paid' }).click();
    await page.getByRole('article').getByRole('link', { name: 'orders' }).waitFor();
    await page.getByRole('article').locator('.badge', { hasText: 'delivered' }).waitFor();
    await capture(page, 'explore');

    // Back through the ledger by cursor, newest first, and forward again: 30 events make two pages of 25.
    await writeEvents(
      s.deps.sql,
      Array.from({ length: 30 }, (_, i) => ({
        id: randomUUID(),
        app_id: app.appId,
        event_type: `page.item_${String(i).padStart(2, '0')}`,
        payload: {},
        edges: [],
        attachments: [],
      })),
    );
    await page.getByLabel('Event types').fill('page.*');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByRole('button', { name: 'page.item_29' }).waitFor();
    expect(await page.getByRole('button', { name: 'page.item_04' }).count()).toBe(0);
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.getByRole('button', { name: 'page.item_00' }).waitFor();
    expect(await page.getByRole('button', { name: 'page.item_29' }).count()).toBe(0);
    expect(await page.getByTestId('curl').textContent()).toContain('before=');
    await page.getByRole('button', { name: 'Previous page' }).click();
    await page.getByRole('button', { name: 'page.item_29' }).waitFor();
  });

  it('creates, lists and revokes API keys', async () => {
    await page.getByRole('link', { name: 'Keys' }).click();
    await page.getByRole('button', { name: 'Create key' }).click();
    expect(await page.getByTestId('secret').textContent()).toMatch(/^gw_/);
    await page.getByRole('row').nth(2).waitFor();
    await capture(page, 'keys');
    // Revoking asks first; the key then answers 401 at once.
    const made = await s.request('POST', '/v1/api-keys', { auth: app, body: { scopes: ['events:read'] } });
    expect(made.status).toBe(201);
    await page.reload();
    page.once('dialog', (d) => void d.accept());
    await page.getByRole('row').filter({ hasText: made.json.key_prefix }).getByRole('button', { name: 'Revoke' }).click();
    await page
      .getByRole('row')
      .filter({ hasText: made.json.key_prefix })
      .getByText(/^revoked/)
      .waitFor();
    const headers = { Authorization: `Bearer ${made.json.api_key}`, 'X-Service-App-ID': app.appId };
    expect((await s.request('GET', '/v1/events', { headers })).status).toBe(401);
    // The portal sessions are listed beside the keys: this page's own among them.
    await page.locator('tr[data-session-id]').first().waitFor();
  });

  it('finds the user the test message went to by platform identity, makes a link code and merges a user in', async () => {
    await page.getByRole('link', { name: 'Users' }).click();
    await page.getByLabel('Platform', { exact: true }).selectOption('TELEGRAM');
    await page.getByLabel('Platform id').fill('4242');
    await page.getByRole('button', { name: 'Find' }).click();
    const panel = page.getByRole('article');
    await panel.getByText('telegram 4242').first().waitFor();
    await panel.getByText('message.outbound').waitFor();
    await panel.getByRole('button', { name: 'Generate link code' }).click();
    expect(await panel.getByTestId('secret').textContent()).toMatch(/\S{4,}/);

    // A second user (another Telegram account) merged into this one through the page.
    const send = await s.request('POST', '/v1/messages', {
      auth: app,
      body: { platform_connection_id: connectionId, to_external_id: '4343', message: 'hi' },
    });
    expect(send.status).toBeLessThan(300);
    const other = await s.request('GET', '/v1/users?platform=TELEGRAM&external_id=4343', { auth: app });
    const otherId = other.json.data[0].id as string;
    await panel.getByLabel('User id to merge into this one').fill(otherId);
    page.once('dialog', (d) => void d.accept());
    await panel.getByRole('button', { name: 'Merge', exact: true }).click();
    await panel.getByText('Merged.').waitFor();
    await panel.getByText('telegram 4343').first().waitFor();
    await capture(page, 'users');
  });

  it('creates and edits a RabbitMQ destination, shows its confirms and errors, and replays to it', async () => {
    // The machine's RabbitMQ; this test's exchange and queue are named gwtest.<random> and deleted at the end.
    const name = `gwtest.${randomUUID().slice(0, 8)}`;
    const broker: ChannelModel = await connect('amqp://guest:guest@127.0.0.1:5672');
    const ch = await broker.createChannel();
    try {
      await ch.assertExchange(`${name}.x`, 'topic', { durable: false });
      await ch.assertQueue(`${name}.q`, { durable: false });
      await ch.bindQueue(`${name}.q`, `${name}.x`, '#');
      const got: ConsumeMessage[] = [];
      await ch.consume(`${name}.q`, (m) => m && got.push(m), { noAck: true });

      await page.getByRole('link', { name: 'Webhooks' }).click();
      await page.getByRole('button', { name: 'New webhook' }).click();
      const form = page.getByRole('form', { name: 'New webhook' });
      await form.getByLabel('Name', { exact: true }).fill('shipments');
      await form.getByLabel('Destination').selectOption('rabbitmq');
      // The fields follow the kind: a broker has no endpoint URL, and its routing key starts at the service's default.
      expect(await form.getByLabel('Endpoint URL').count()).toBe(0);
      expect(await form.getByLabel('Routing key').inputValue()).toBe('{event_type}');
      await form.getByLabel('Broker URL').fill('amqp://127.0.0.1:5672');
      await form.getByLabel('User', { exact: true }).fill('guest');
      await form.getByLabel('Password', { exact: true }).fill('guest');
      await form.getByLabel('Exchange').fill(`${name}.x`);
      await form.getByLabel('Routing key').fill('gw.{event}');
      await form.getByLabel('Event patterns').fill('shipment.*');
      // The service's refusal, as it answered.
      await form.getByRole('button', { name: 'Create webhook' }).click();
      await form.getByRole('alert').getByText('only {event_type} and {app_id} may be used (VALIDATION_ERROR)').waitFor();
      await capture(page, 'broker-destination-form');
      await form.getByLabel('Routing key').fill('gw.{event_type}');
      await form.getByRole('button', { name: 'Create webhook' }).click();
      expect(await page.getByTestId('secret').textContent()).toMatch(/^whsec_/);
      await page.getByRole('cell', { name: 'rabbitmq · amqp://127.0.0.1:5672' }).waitFor();
      await page.getByRole('link', { name: 'Open shipments' }).click();
      await page.getByRole('heading', { name: 'shipments' }).waitFor();
      const subId = page.url().split('/').pop()!;
      const sealed = async () =>
        s.deps.secrets.open(
          (await s.deps.sql`SELECT destination_secret_sealed FROM webhook_subscriptions WHERE id = ${subId}`)[0].destination_secret_sealed,
        );
      expect(await sealed()).toBe('amqp://guest:guest@127.0.0.1:5672');
      await page.getByTestId('destination-kind').getByText('rabbitmq (publish to your broker)').waitFor();
      await page.locator('.facts').getByText('gw.{event_type}').waitFor();
      // The credentials are never shown back.
      expect(await page.locator('body').textContent()).not.toContain('guest');

      // Published, confirmed: the attempt says so.
      expect(
        (await s.request('POST', '/v1/events', { auth: app, body: { event_type: 'shipment.sent', payload: { box: 1 } } })).status,
      ).toBe(201);
      const sent = page.locator('.deliveries > li').filter({ hasText: 'shipment.sent' });
      await sent.locator('.badge', { hasText: 'delivered' }).waitFor({ timeout: 15_000 });
      await sent.getByText('last answer confirmed by the broker').waitFor();
      await expect.poll(() => got.length).toBe(1);
      expect(got[0].fields.routingKey).toBe('gw.shipment.sent');
      await sent.locator('summary').first().click();
      await sent.getByText('Message headers').first().click();
      await sent
        .getByText(/webhook-signature: v1,/)
        .first()
        .waitFor();

      // Edited with the credentials left blank: the stored URL and its credentials stay; the exchange changes.
      await page.getByRole('button', { name: 'Edit' }).click();
      const edit = page.getByRole('form', { name: 'Edit webhook' });
      expect(await edit.getByLabel('Destination').inputValue()).toBe('rabbitmq');
      expect(await edit.getByLabel('Broker URL').inputValue()).toBe('amqp://127.0.0.1:5672');
      expect(await edit.getByLabel('Password', { exact: true }).inputValue()).toBe('');
      await edit.getByLabel('Exchange').fill(`${name}.missing`);
      await edit.getByRole('button', { name: 'Save changes' }).click();
      await page.getByText('Saved.').waitFor();
      await page.locator('.facts').getByText(`${name}.missing`).waitFor();
      expect(await sealed()).toBe('amqp://guest:guest@127.0.0.1:5672');

      // The broker's refusal is the attempt's answer; fixed, a replay delivers it.
      const before = new Date().toISOString();
      expect((await s.request('POST', '/v1/events', { auth: app, body: { event_type: 'shipment.lost', payload: {} } })).status).toBe(201);
      const lost = page.locator('.deliveries > li').filter({ hasText: 'shipment.lost' });
      await lost.locator('.badge', { hasText: 'failed' }).waitFor({ timeout: 15_000 });
      await lost.locator('summary').first().click();
      await lost
        .getByText(/not confirmed.*NOT_FOUND - no exchange/)
        .first()
        .waitFor();
      await capture(page, 'broker-destination');
      await page.getByRole('button', { name: 'Edit' }).click();
      await edit.getByLabel('Exchange').fill(`${name}.x`);
      await edit.getByRole('button', { name: 'Save changes' }).click();
      await page.locator('.facts').getByText(`${name}.x`).waitFor();
      await page.getByLabel('Replay events since').fill(before);
      await page.getByRole('button', { name: 'Replay', exact: true }).click();
      await page.getByText(/Replay queued 1 delivery/).waitFor();
      await lost.locator('.badge', { hasText: 'delivered' }).waitFor({ timeout: 15_000 });
      await expect.poll(() => got.map((m) => m.fields.routingKey)).toEqual(['gw.shipment.sent', 'gw.shipment.lost']);
    } finally {
      await ch.deleteQueue(`${name}.q`).catch(() => {});
      await ch.deleteExchange(`${name}.x`).catch(() => {});
      await broker.close();
    }
  });

  it('creates a NATS destination whose user and password go as its credentials, never in its URL, and delivers to it', async () => {
    // The machine's NATS with JetStream; this test's stream is gwtest_<random> on gwtest.<random>.> and deleted at the end.
    const tag = randomUUID().slice(0, 8);
    const nc = await connectNats({ servers: '127.0.0.1:4222' });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: `gwtest_${tag}`, subjects: [`gwtest.${tag}.>`] });
    try {
      await page.getByRole('link', { name: 'Webhooks', exact: true }).click();
      await page.getByRole('button', { name: 'New webhook' }).click();
      const form = page.getByRole('form', { name: 'New webhook' });
      await form.getByLabel('Name', { exact: true }).fill('orders-nats');
      await form.getByLabel('Destination').selectOption('nats');
      // Credentials are User and Password beside the URL, not a field of their own.
      expect(await form.getByLabel('Credentials').count()).toBe(0);
      await form.getByLabel('Broker URL').fill('nats://127.0.0.1:4222');
      await form.getByLabel('User', { exact: true }).fill('orders');
      await form.getByLabel('Password', { exact: true }).fill('orders-secret');
      await form.getByLabel('Subject').fill(`gwtest.${tag}.{event_type}`);
      await form.getByLabel('Event patterns').fill('order.*');
      await form.getByRole('button', { name: 'Create webhook' }).click();
      await page.getByRole('cell', { name: 'nats · nats://127.0.0.1:4222' }).waitFor();
      const [row] = await s.deps.sql`SELECT id, destination_secret_sealed FROM webhook_subscriptions WHERE name = 'orders-nats'`;
      expect(JSON.parse(s.deps.secrets.open(row.destination_secret_sealed))).toEqual({
        servers: ['nats://127.0.0.1:4222'],
        credentials: { type: 'user_password', user: 'orders', password: 'orders-secret' },
      });
      expect(await page.locator('body').textContent()).not.toContain('orders-secret');

      expect((await s.request('POST', '/v1/events', { auth: app, body: { event_type: 'order.placed', payload: {} } })).status).toBe(201);
      await page.getByRole('link', { name: 'Open orders-nats' }).click();
      const sent = page.locator('.deliveries > li').filter({ hasText: 'order.placed' });
      await sent.locator('.badge', { hasText: 'delivered' }).waitFor({ timeout: 15_000 });
      await sent.getByText('last answer confirmed by the broker').waitFor();
      expect((await jsm.streams.info(`gwtest_${tag}`)).state.messages).toBe(1);
    } finally {
      await jsm.streams.delete(`gwtest_${tag}`).catch(() => {});
      await nc.close();
    }
  });
});

describe('the portal offline', () => {
  it('requested nothing from any host but the service while every area was used', () => {
    expect(requested.size).toBeGreaterThan(10);
    const elsewhere = [...requested].filter((u) => !u.startsWith(`${s.base}/`) && !u.startsWith('data:'));
    expect(elsewhere).toEqual([]);
  });
});

describe('the live event list', () => {
  it('holds 10,000 live rows while only the rows in view are in the page', async () => {
    const busy = await s.createApp();
    const ctx = await newContext();
    try {
      const p = await ctx.newPage();
      const r = await s.request('POST', '/v1/portal/sessions', { auth: busy, body: {} });
      const link = new URL(r.json.url);
      await p.goto(`${s.base}${link.pathname}${link.hash}`);
      await p.getByTestId('stream-state').getByText('Live').waitFor();
      // Written straight to the ledger (the API's rate limit would take minutes), then one event
      // through the API wakes the stream, which sends everything after its cursor.
      for (let batch = 0; batch < 10; batch++)
        await writeEvents(
          s.deps.sql,
          Array.from({ length: 1_000 }, (_, i) => ({
            id: randomUUID(),
            app_id: busy.appId,
            event_type: 'load.tick',
            payload: { i: batch * 1_000 + i },
            edges: [],
            attachments: [],
          })),
        );
      expect((await s.request('POST', '/v1/events', { auth: busy, body: { event_type: 'load.last', payload: {} } })).status).toBe(201);
      // The newest event (in view at the top) and the count of the rows kept: the newest 10,000,
      // ticks 1 to 9,999 and load.last (tick 0 dropped).
      await p.locator('[data-event-type="load.last"]').waitFor({ timeout: 20_000 });
      await p
        .getByTestId('row-count')
        .getByText(/^10,?000$/)
        .waitFor({ timeout: 20_000 });
      expect(await p.locator('.row-slot').count()).toBeLessThan(80);
      // Scrolled to the far end, the oldest kept rows are drawn in place of the newest. Awaited
      // on the oldest row itself: ticks are in the page before the scroll too, and the rows are
      // redrawn only after the scroll event has been handled.
      await p.locator('.rows').evaluate((el) => el.scrollTo(0, el.scrollHeight));
      await p.locator('[data-event-type="load.tick"]').filter({ hasText: '{"i":1}' }).waitFor();
      expect(await p.locator('[data-event-type="load.last"]').count()).toBe(0);
      expect(await p.locator('.row-slot').count()).toBeLessThan(80);
    } finally {
      await ctx.close();
    }
  });
});

describe('portal access', () => {
  it('refuses an expired and a forged sign-in link', async () => {
    const expired = await signInLink();
    await s.deps
      .sql`UPDATE portal_sessions SET token_expires_at = now() - interval '1 second' WHERE app_id = ${app.appId} AND exchanged_at IS NULL`;
    const forged = `${s.base}/portal/signin#token=${'x'.repeat(43)}`;
    for (const link of [expired, forged]) {
      const ctx = await newContext();
      try {
        const p = await ctx.newPage();
        await p.goto(link);
        await p.getByText('This sign-in link has expired, was already used, or is not valid').waitFor();
        expect(await p.getByRole('navigation', { name: 'Portal areas' }).count()).toBe(0);
        // And the API agrees: no session cookie was set.
        expect(await p.evaluate(() => fetch('/v1/events').then((r) => r.status))).toBe(401);
        if (link === forged) await capture(p, 'signin-refused');
      } finally {
        await ctx.close();
      }
    }
  });

  it('shows the signed-out page on the live view as soon as the application ends its sessions', async () => {
    const ctx = await newContext();
    try {
      const p = await ctx.newPage();
      await p.goto(await signInLink());
      await p.getByTestId('stream-state').getByText('Live').waitFor();
      const revoked = await s.request('DELETE', '/v1/portal/sessions', { auth: app });
      expect(revoked.status).toBe(200);
      await p.getByText('Your portal session has ended').waitFor();
    } finally {
      await ctx.close();
    }
  });

  it('keeps a webhooks-only session out of the other areas', async () => {
    const ctx = await newContext();
    try {
      const p = await ctx.newPage();
      await p.goto(await signInLink({ areas: ['webhooks'], return_url: 'https://app.example.com/settings' }));
      await p.getByRole('heading', { name: 'Webhooks' }).waitFor();
      const nav = await p.getByRole('navigation', { name: 'Portal areas' }).getByRole('link').allTextContents();
      expect(nav).toEqual(['Webhooks']);
      await p.getByRole('link', { name: 'Back to app.example.com' }).waitFor();
      await capture(p, 'webhooks-embed');
      for (const area of ['live', 'explore', 'connections', 'users', 'keys']) {
        await p.goto(`${s.base}/portal/${area}`);
        await p.getByRole('heading', { name: 'Not available in this session' }).waitFor();
      }
      // The page's refusal is the API's: the session itself cannot reach other areas.
      const statuses = await p.evaluate(() =>
        Promise.all(
          ['/v1/events', '/v1/platform-connections', '/v1/api-keys', '/v1/webhook-subscriptions'].map((u) =>
            fetch(u).then((r) => r.status),
          ),
        ),
      );
      expect(statuses).toEqual([403, 403, 403, 200]);

      await p.getByRole('button', { name: 'Sign out' }).click();
      await p.getByText('You signed out.').waitFor();
      expect(await p.evaluate(() => fetch('/v1/webhook-subscriptions').then((r) => r.status))).toBe(401);
    } finally {
      await ctx.close();
    }
  });

  it("opens an events-only embed on its live view, shows its channel's events and asks for nothing it may not open", async () => {
    const ctx = await newContext();
    const refused: string[] = [];
    try {
      const p = await ctx.newPage();
      p.on('response', (r) => r.status() === 403 && refused.push(r.url()));
      await p.goto(await signInLink({ areas: ['events'], scope: { channels: ['customer-7'] } }));
      await p.getByTestId('stream-state').getByText('Live').waitFor();
      expect(new URL(p.url()).pathname).toBe('/portal/live');
      const nav = await p.getByRole('navigation', { name: 'Portal areas' }).getByRole('link').allTextContents();
      expect(nav).toEqual(['Live events', 'Explore']);
      const post = (event_type: string, channels: string[]) =>
        s.request('POST', '/v1/events', { auth: app, body: { event_type, payload: { n: 1 }, channels } });
      expect((await post('invoice.other', ['customer-8'])).status).toBe(201);
      expect((await post('invoice.mine', ['customer-7'])).status).toBe(201);
      await p.locator('[data-event-type="invoice.mine"]').first().click();
      await p.getByRole('heading', { name: 'invoice.mine' }).waitFor();
      expect(await p.locator('[data-event-type="invoice.other"]').count()).toBe(0);
      // The event view of an embed without webhooks neither asks for deliveries nor shows an error.
      expect(await p.getByRole('heading', { name: 'Webhook deliveries' }).count()).toBe(0);
      expect(await p.getByRole('alert').count()).toBe(0);
      expect(refused).toEqual([]);
    } finally {
      await ctx.close();
    }
  });
});

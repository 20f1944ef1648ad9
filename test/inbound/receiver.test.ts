import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { CASES } from './cases.js';
import {
  connect,
  edgesOf,
  eventsAbout,
  inboundJobCount,
  postWebhook,
  queuesIdle,
  waitForEvent,
  type CreatedConnection,
} from './helpers.js';

let s: TestStack;
let app: AppCredentials;
const conns = new Map<string, CreatedConnection>();

beforeAll(async () => {
  s = await startTestStack({ workers: ['inbound', 'ledger', 'transcription'] });
  app = await s.createApp();
  for (const c of CASES) conns.set(c.platform, await connect(s, app, c.platform, c.config('http://127.0.0.1:9')));
});
afterAll(() => s?.close());

describe.each(CASES)('$platform inbound end to end', (c) => {
  const conn = () => conns.get(c.platform)!;

  it('records a signed text message as message.inbound, sent by the user to the connected account', async () => {
    const d = c.text(1, `hello from ${c.platform}`, conn().webhookUrl);
    const r = await postWebhook(s, conn().path, d.body, d.headers);
    expect(r.status, r.text).toBe(200);
    expect(r.contentType).toMatch(c.ack.contentType);
    if (c.ack.body) expect(r.text).toBe(c.ack.body);

    const event = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.external_message_id === c.externalId(1));
    expect(event.payload).toMatchObject({
      message: {
        text: c.platform === 'DISCORD' ? `/say text:hello from ${c.platform}` : `hello from ${c.platform}`,
        role: 'user',
        type: 'text',
      },
      platform: c.platform.toLowerCase(),
      external_message_id: c.externalId(1),
      conversation_id: event.conversation_id,
    });

    const edges = await edgesOf(s, event.id);
    expect(edges.map((e) => [e.edge_type, e.target_node_type, e.external_id, e.is_system_user])).toEqual([
      ['sent_by', 'platform_user', c.sender, false],
      ['sent_to', 'platform_user', c.system, true],
    ]);
    const [conversation] = await s.deps
      .sql`SELECT external_id, platform_connection_id, last_inbound_at FROM conversations WHERE app_id = ${app.appId} AND id = ${event.conversation_id}`;
    expect(conversation).toMatchObject({ external_id: c.conversation, platform_connection_id: conn().id });
    expect(conversation.last_inbound_at).toBeInstanceOf(Date);
    const [user] = await s.deps
      .sql`SELECT user_id, platform FROM platform_users WHERE app_id = ${app.appId} AND platform_connection_id = ${conn().id} AND external_id = ${c.sender}`;
    expect(user).toMatchObject({ platform: c.platform });
    expect(user.user_id).toBeTruthy();
  });

  it('refuses a forged signature with 401 {error} and enqueues nothing', async () => {
    await queuesIdle(s);
    const before = await inboundJobCount(s);
    const d = c.forged(2, 'forged', conn().webhookUrl);
    const r = await postWebhook(s, conn().path, d.body, d.headers);
    expect(r.status).toBe(401);
    expect(JSON.parse(r.text)).toEqual({ error: { code: 'UNAUTHORIZED', message: expect.any(String) } });
    expect(await inboundJobCount(s)).toBe(before);
    expect(await eventsAbout(s, app.appId, 'message.inbound', c.externalId(2))).toEqual([]);
  });

  it('collapses the platform retrying the same delivery into one event', async () => {
    const d = c.text(3, 'sent three times', conn().webhookUrl);
    for (let i = 0; i < 3; i++) expect((await postWebhook(s, conn().path, d.body, d.headers)).status).toBe(200);
    await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.external_message_id === c.externalId(3));
    await queuesIdle(s);
    expect(await eventsAbout(s, app.appId, 'message.inbound', c.externalId(3))).toHaveLength(1);
  });
});

describe('receiver refusals', () => {
  it('answers 401 for an unknown webhook id or a wrong URL secret, before any platform check', async () => {
    const tg = conns.get('TELEGRAM')!;
    const d = CASES[0].text(10, 'x', tg.webhookUrl);
    const [, , id, secret] = tg.path.split('/');
    expect((await postWebhook(s, `/webhooks/${id}/${secret}x`, d.body, d.headers)).status).toBe(401);
    expect((await postWebhook(s, `/webhooks/00000000-0000-4000-8000-000000000000/${secret}`, d.body, d.headers)).status).toBe(401);
    expect((await postWebhook(s, `/webhooks/not-a-uuid/${secret}`, d.body, d.headers)).status).toBe(401);
  });

  it('answers 400 for a verified body that is not a delivery of the platform', async () => {
    const tg = conns.get('TELEGRAM')!;
    const r = await postWebhook(s, tg.path, '{"hello":"world"}', {
      'Content-Type': 'application/json',
      'X-Telegram-Bot-Api-Secret-Token': 'tg_secret-token_1',
    });
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text).error).toMatchObject({ code: 'VALIDATION_ERROR', message: expect.stringMatching(/not a TELEGRAM delivery/) });
  });

  it('answers 410 for a disabled connection', async () => {
    const extra = await connect(s, app, 'TELEGRAM', { bot_token: '5:x' }, 'to disable');
    expect((await s.request('PATCH', `/v1/platform-connections/${extra.id}`, { auth: app, body: { status: 'DISABLED' } })).status).toBe(
      200,
    );
    const r = await postWebhook(
      s,
      extra.path,
      JSON.stringify({ update_id: 1, message: { message_id: 1, chat: { id: 1, type: 'private' }, date: 1, text: 'x' } }),
      { 'Content-Type': 'application/json' },
    );
    expect(r.status).toBe(410);
    expect(JSON.parse(r.text)).toEqual({ error: { code: 'INBOUND_DISABLED', message: 'connection disabled' } });
  });

  it('answers another method with the one error body, 405 and Allow', async () => {
    const r = await fetch(s.base + conns.get('TELEGRAM')!.path, { method: 'PUT', body: '{}' });
    expect(r.status).toBe(405);
    expect(r.headers.get('allow')).toBe('GET, POST');
    expect(await r.json()).toEqual({ error: { code: 'METHOD_NOT_ALLOWED', message: 'PUT is not allowed on an inbound URL' } });
  });

  it('honours disabling a connection it has just served within INBOUND_LOOKUP_CACHE_MS', async () => {
    const busy = await connect(s, app, 'TELEGRAM', { bot_token: '6:y' }, 'busy then disabled');
    const update = (n: number) =>
      JSON.stringify({
        update_id: n,
        message: { message_id: n, from: { id: 6, is_bot: false, first_name: 'A' }, chat: { id: 6, type: 'private' }, date: 1, text: 'x' },
      });
    expect((await postWebhook(s, busy.path, update(1), { 'Content-Type': 'application/json' })).status).toBe(200);
    await s.request('PATCH', `/v1/platform-connections/${busy.id}`, { auth: app, body: { status: 'DISABLED' } });
    const disabledAt = Date.now();
    let n = 2;
    await expect
      .poll(async () => (await postWebhook(s, busy.path, update(n++), { 'Content-Type': 'application/json' })).status, {
        timeout: s.config.INBOUND_LOOKUP_CACHE_MS + 2000,
        interval: 100,
      })
      .toBe(410);
    expect(Date.now() - disabledAt).toBeLessThan(s.config.INBOUND_LOOKUP_CACHE_MS + 1000);
  });

  it('accepts Telegram updates without the header when the connection set no secret token', async () => {
    const open = await connect(s, app, 'TELEGRAM', { bot_token: '777:open' }, 'no secret');
    const r = await postWebhook(
      s,
      open.path,
      JSON.stringify({
        update_id: 5,
        message: {
          message_id: 9,
          from: { id: 42, is_bot: false, first_name: 'Zed' },
          chat: { id: 42, type: 'private' },
          date: 1,
          text: 'open',
        },
      }),
      {
        'Content-Type': 'application/json',
      },
    );
    expect(r.status).toBe(200);
    const event = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.external_message_id === '42:9');
    expect(event.payload.message.text).toBe('open');
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, eventually } from '../helpers/connections.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { maxInWindow } from '../fakes/fake-server.js';
import { MessengerFake } from '../fakes/messenger.js';
import { TelegramFake } from '../fakes/telegram.js';

// SEND_WAIT_MS=0: POST /v1/messages answers 202 at once, so many sends can be in flight.
let s: TestStack;
let a: AppCredentials;
let tg: TelegramFake;
let fb: MessengerFake;

beforeAll(async () => {
  tg = await TelegramFake.start({ limits: true });
  fb = await MessengerFake.start();
  s = await startTestStack({ workers: ['ledger', 'send'], env: { SEND_WAIT_MS: '0', RATE_LIMIT_PER_MINUTE: '100000' } });
  a = await s.createApp();
});
afterAll(async () => {
  await s.close();
  await Promise.all([tg.close(), fb.close()]);
});

const post = (connId: string, to: string, message: string) =>
  s.request('POST', '/v1/messages', { auth: a, body: { platform_connection_id: connId, to_external_id: to, message } });

describe('send queue behaviour', () => {
  it('answers 202 queued when the outcome is not there in time, and the outcome arrives as message.outbound', async () => {
    const conn = await connect(s, a, 'MESSENGER', { page_access_token: 't', page_id: '4001', app_secret: 's', verify_token: 'v', api_base_url: fb.url });
    const r = await post(conn.id, '123', 'later');
    expect(r.status).toBe(202);
    expect(r.json).toEqual({ id: expect.any(String), status: 'queued', created_at: expect.any(String) });
    const ev = await eventually(async () => {
      const e = await s.request('GET', `/v1/events/${r.json.id}`, { auth: a });
      return e.status === 200 ? e.json : undefined;
    }, 10_000, 'message.outbound');
    expect(ev).toMatchObject({ event_type: 'message.outbound', payload: { platform: 'messenger', external_message_id: expect.stringMatching(/^m_/) } });
    expect((await s.request('GET', `/v1/messages/${r.json.id}`, { auth: a })).json.status).toBe('sent');
  });

  it('keeps order per recipient: a message never overtakes an earlier one that is being retried', async () => {
    const conn = await connect(s, a, 'MESSENGER', { page_access_token: 't', page_id: '4002', app_secret: 's', verify_token: 'v', api_base_url: fb.url });
    // The first try of the first message fails twice (502): without ordering, 2..6 would go out before it.
    fb.server.script(2, { status: 502, body: 'Bad Gateway' }, (r) => r.json?.message?.text === 'm1');
    const texts = ['m1', 'm2', 'm3', 'm4', 'm5', 'm6'];
    const posted = [];
    for (const t of texts) posted.push(await post(conn.id, '900', t));
    expect(posted.every((p) => p.status === 202)).toBe(true);
    // Another recipient of the same connection is not held up by 900's retries.
    await post(conn.id, '901', 'other');
    await eventually(async () => fb.accepted.filter((r) => r.path === '/v21.0/4002/messages').length === 7 || undefined, 20_000, 'all sends');
    const toFirst = fb.accepted.filter((r) => r.path === '/v21.0/4002/messages' && r.json.recipient.id === '900').map((r) => r.json.message.text);
    expect(toFirst).toEqual(texts);
    const order = fb.accepted.filter((r) => r.path === '/v21.0/4002/messages').map((r) => r.json.message.text);
    expect(order.indexOf('other')).toBeLessThan(order.indexOf('m1'));
    expect(fb.server.received((r) => r.json?.message?.text === 'm1')).toHaveLength(3);
  });

  it('stays within Telegram limits (30/s per bot, 1/s per chat): no 429 from a fake that enforces them, nothing failed', async () => {
    const conn = await connect(s, a, 'TELEGRAM', { bot_token: '880001:budget-token', api_base_url: tg.url });
    const chats = Array.from({ length: 30 }, (_, i) => String(100 + i));
    const started = performance.now();
    // Rounds one after another (each round's 30 posts at once), so each chat's order is r0, r1, r2.
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(chats.map((chat) => post(conn.id, chat, `r${round}`)));
      expect(answers.every((r) => r.status === 202)).toBe(true);
    }
    await eventually(async () => tg.accepted.length >= 90 || undefined, 25_000, '90 sends');
    expect(tg.limitHits).toBe(0);
    const times = tg.accepted.map((r) => r.at);
    // 90 sends at ≤ 30/s take at least ~3 s; per chat, three sends at ≤ 1/s at least ~2 s.
    expect(Math.max(...times) - Math.min(...times)).toBeGreaterThanOrEqual(2900);
    expect(maxInWindow(times, 1000)).toBeLessThanOrEqual(31);
    for (const chat of chats) {
      const t = tg.accepted.filter((r) => r.json.chat_id === chat).map((r) => r.at);
      expect(t).toHaveLength(3);
      // Paced ~1 s apart by our budget; arrival jitter under a loaded test run eats into that,
      // which the fake's documented burst allowance absorbs (no 429 above).
      expect(t[1] - t[0]).toBeGreaterThanOrEqual(600);
      expect(t[2] - t[1]).toBeGreaterThanOrEqual(600);
      expect(tg.accepted.filter((r) => r.json.chat_id === chat).map((r) => r.json.text)).toEqual(['r0', 'r1', 'r2']);
    }
    const [{ failed }] = await s.deps.sql<{ failed: number }[]>`SELECT count(*)::int AS failed FROM outbound_messages WHERE platform_connection_id = ${conn.id} AND status <> 'sent'`;
    expect(failed).toBe(0);
    expect(performance.now() - started).toBeLessThan(20_000);
  });
});

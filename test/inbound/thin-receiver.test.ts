import { queueFor } from '../../src/queues.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as P from '../fakes/inbound/payloads.js';
import { form, telegramHeaders, twilioHeaders } from '../fakes/inbound/signers.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { connect, eventsOf, postWebhook, type CreatedConnection } from './helpers.js';

// No inbound worker: what the web process does on its own is all that happens.
let s: TestStack;
let app: AppCredentials;
let tg: CreatedConnection;
let tg2: CreatedConnection;
let sms: CreatedConnection;

const FLOOD = 5;

beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger'], env: { INBOUND_FLOOD_PER_SECOND: String(FLOOD) } });
  app = await s.createApp();
  tg = await connect(s, app, 'TELEGRAM', { bot_token: '1:a', secret_token: 'tok' });
  tg2 = await connect(s, app, 'TELEGRAM', { bot_token: '2:b' });
  sms = await connect(s, app, 'SMS', { account_sid: 'AC0123456789abcdef0123456789abcdef', auth_token: 'tw', from: '+15550003333' });
});
afterAll(() => s?.close());

describe('the receiver only verifies and enqueues', () => {
  it('answers 200 and leaves the raw delivery on the inbound queue under the platform dedupe key', async () => {
    const body = JSON.stringify(P.tgText(31337, 1, 'queued only'));
    const r = await postWebhook(s, tg.path, body, { ...telegramHeaders('tok'), 'X-Unrelated': 'dropped' });
    expect(r.status).toBe(200);
    const job = await queueFor(s.deps.queues, 'inbound').getJob(`in-${tg.id}-31337`);
    expect(job).toBeTruthy();
    expect(await job!.getState()).toBe('waiting');
    expect(job!.data).toMatchObject({
      connection_id: tg.id,
      platform: 'TELEGRAM',
      dedupe_key: '31337',
      headers: { 'content-type': 'application/json' },
    });
    expect(Buffer.from(job!.data.body, 'base64').toString()).toBe(body);
    expect(job!.data.headers['x-telegram-bot-api-secret-token']).toBeUndefined();
    expect(await eventsOf(s, app.appId)).toEqual([]);
  });

  it('queues a redelivery onto the same job', async () => {
    const body = JSON.stringify(P.tgText(31338, 2, 'twice'));
    await postWebhook(s, tg.path, body, telegramHeaders('tok'));
    await postWebhook(s, tg.path, body, telegramHeaders('tok'));
    const waiting = (await queueFor(s.deps.queues, 'inbound').getJobs(['waiting'])).filter((j) => j.id === `in-${tg.id}-31338`);
    expect(waiting).toHaveLength(1);
  });

  it('acknowledges concurrent deliveries (queued together) only once each one is in Redis', async () => {
    const fresh = await connect(s, app, 'TELEGRAM', { bot_token: '3:c' });
    // Fewer than the limit: a burst straddling a window boundary may be admitted slightly fewer (docs/inbound.md).
    const ids = Array.from({ length: FLOOD - 2 }, (_, i) => 42000 + i);
    const checks = ids.map(async (id) => {
      const r = await postWebhook(s, fresh.path, JSON.stringify(P.tgText(id, id, 'together')), telegramHeaders());
      expect(r.status).toBe(200);
      expect(await queueFor(s.deps.queues, 'inbound').getJob(`in-${fresh.id}-${id}`)).toBeTruthy();
    });
    await Promise.all(checks);
  });

  it('signs Twilio requests over PUBLIC_BASE_URL, not the address the request came in on', async () => {
    expect(sms.webhookUrl.startsWith(s.config.PUBLIC_BASE_URL)).toBe(true);
    expect(s.config.PUBLIC_BASE_URL).not.toBe(s.base);
    const params = P.twilioInbound('SMthin', '+16505550001', '+15550003333', 'x');
    expect((await postWebhook(s, sms.path, form(params), twilioHeaders('tw', sms.webhookUrl, params))).status).toBe(200);
    expect((await postWebhook(s, sms.path, form(params), twilioHeaders('tw', s.base + sms.path, params))).status).toBe(401);
  });
});

describe('per-connection flood guard', () => {
  // Forged deliveries first: they must not use up the connection's budget for the real ones.
  it('does not count forged deliveries against the connection', async () => {
    for (let i = 0; i < FLOOD * 2; i++) {
      const r = await postWebhook(s, tg.path, JSON.stringify(P.tgText(80000 + i, i, 'forged')), telegramHeaders('wrong'));
      expect(r.status).toBe(401);
    }
    expect((await postWebhook(s, tg.path, JSON.stringify(P.tgText(80100, 1, 'real')), telegramHeaders('tok'))).status).toBe(200);
  });

  it(`accepts ${FLOOD} deliveries a second per connection, then answers 429 with Retry-After, leaving other connections alone`, async () => {
    const send = (c: CreatedConnection, n: number) =>
      fetch(s.base + c.path, {
        method: 'POST',
        headers: c === tg ? telegramHeaders('tok') : telegramHeaders(),
        body: JSON.stringify(P.tgText(70000 + n, n, 'flood')),
      });
    const burst = 3 * FLOOD;
    const results = await Promise.all(Array.from({ length: burst }, (_, i) => send(tg, i)));
    const accepted = results.filter((r) => r.status === 200).length;
    const limited = results.filter((r) => r.status === 429);
    // The window is one second; a burst straddling two windows gets at most two windows' worth.
    expect(accepted).toBeLessThanOrEqual(2 * FLOOD);
    expect(accepted + limited.length).toBe(burst);
    expect(limited.length).toBeGreaterThanOrEqual(FLOOD);
    expect(Number(limited[0].headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await limited[0].json()).toEqual({ error: { code: 'RATE_LIMITED', message: 'too many deliveries' } });
    expect((await send(tg2, 999)).status).toBe(200);
  });
});

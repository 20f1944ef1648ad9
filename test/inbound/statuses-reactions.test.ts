import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertConversation } from '../../src/identity/platform-users.js';
import { systemEvent } from '../../src/ledger/event-types.js';
import { enqueue } from '../../src/queues.js';
import * as P from '../fakes/inbound/payloads.js';
import { form, metaHeaders, slackHeaders, telegramHeaders, twilioHeaders } from '../fakes/inbound/signers.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import {
  connect,
  edgesOf,
  eventsAbout,
  eventsOf,
  postWebhook,
  queuesIdle,
  waitForEvent,
  waitForEvents,
  type CreatedConnection,
} from './helpers.js';

let s: TestStack;
let app: AppCredentials;
let wa: CreatedConnection;
let sms: CreatedConnection;
let fb: CreatedConnection;
let tg: CreatedConnection;
let slack: CreatedConnection;

beforeAll(async () => {
  s = await startTestStack({ workers: ['inbound', 'ledger'], env: { SEND_WAIT_MS: '0' } });
  app = await s.createApp();
  wa = await connect(s, app, 'WHATSAPP', {
    access_token: 't',
    phone_number_id: '6100000001',
    business_account_id: '6000000001',
    app_secret: 'wa-s',
    verify_token: 'v',
  });
  sms = await connect(s, app, 'SMS', { account_sid: 'AC0123456789abcdef0123456789abcdef', auth_token: 'tw-s', from: '+15550002222' });
  fb = await connect(s, app, 'MESSENGER', { page_access_token: 't', page_id: '6200000001', app_secret: 'fb-s', verify_token: 'v' });
  tg = await connect(s, app, 'TELEGRAM', { bot_token: '999:tok' });
  slack = await connect(s, app, 'SLACK', { bot_token: 'xoxb-s', signing_secret: 'sl-s' });
});
afterAll(() => s?.close());

/**
 * A message the gateway sent, as the send worker leaves it (workers/send.ts): the row with the
 * platform's id, and its message.outbound event under the row's id.
 */
async function sentMessage(conn: CreatedConnection, to: string, externalId: string, createdAt = new Date()): Promise<string> {
  const id = randomUUID();
  const [{ seq }] = await s.deps.sql<{ seq: number }[]>`
    INSERT INTO recipient_counters (app_id, platform_connection_id, to_external_id, seq) VALUES (${app.appId}, ${conn.id}, ${to}, 1)
    ON CONFLICT (app_id, platform_connection_id, to_external_id) DO UPDATE SET seq = recipient_counters.seq + 1 RETURNING seq`;
  await s.deps.sql`
    INSERT INTO outbound_messages (id, app_id, platform_connection_id, to_external_id, recipient_seq, text, status, external_message_id, created_at, finished_at)
    VALUES (${id}, ${app.appId}, ${conn.id}, ${to}, ${seq}, 'hi', 'sent', ${externalId}, ${createdAt}, ${createdAt})`;
  const [{ platform }] = await s.deps.sql<{ platform: string }[]>`SELECT platform FROM platform_connections WHERE id = ${conn.id}`;
  const conversationId = await upsertConversation(s.deps.sql, { appId: app.appId, connectionId: conn.id, externalId: to });
  await enqueue(s.deps.queues, 'ledger', {
    event: {
      id,
      app_id: app.appId,
      ...systemEvent('message.outbound', {
        text: 'hi',
        platform: platform.toLowerCase(),
        external_message_id: externalId,
        conversation_id: conversationId,
      }),
      edges: [],
      attachments: [],
      conversation_id: conversationId,
      platform_connection_id: conn.id,
    },
  });
  await waitForEvent(s, app.appId, 'message.outbound', (e) => e.id === id);
  return id;
}

const postWa = (payload: object) => {
  const body = JSON.stringify(payload);
  return postWebhook(s, wa.path, body, metaHeaders('wa-s', body));
};
const postFb = (payload: object) => {
  const body = JSON.stringify(payload);
  return postWebhook(s, fb.path, body, metaHeaders('fb-s', body));
};
const postSms = (params: Record<string, string>) => postWebhook(s, sms.path, form(params), twilioHeaders('tw-s', sms.webhookUrl, params));
const postTg = (update: object) => postWebhook(s, tg.path, JSON.stringify(update), telegramHeaders());
const postSlack = (payload: object) => {
  const body = JSON.stringify(payload);
  return postWebhook(s, slack.path, body, slackHeaders('sl-s', body));
};
const statusesOf = async (externalId: string) =>
  (await eventsAbout(s, app.appId, 'message.status', externalId)).map((e) => e.payload.status);

describe('message.status', () => {
  it('records WhatsApp statuses in order with the outbound event as origin and the recipient as sent_to', async () => {
    const outbound = await sentMessage(wa, '+16505551234', 'wamid.OUT1');
    for (const st of ['sent', 'delivered', 'read']) {
      expect((await postWa(P.waStatus('6000000001', '6100000001', 'wamid.OUT1', st))).status).toBe(200);
      await waitForEvent(s, app.appId, 'message.status', (e) => e.payload.external_message_id === 'wamid.OUT1' && e.payload.status === st);
    }
    const events = await eventsAbout(s, app.appId, 'message.status', 'wamid.OUT1');
    expect(events.map((e) => [e.payload.status, e.payload.origin_event_id, e.origin_event_id])).toEqual([
      ['sent', outbound, outbound],
      ['delivered', outbound, outbound],
      ['read', outbound, outbound],
    ]);
    expect((await edgesOf(s, events[0].id)).map((e) => [e.edge_type, e.external_id])).toEqual([['sent_to', '16505551234']]);
  });

  it('never moves a message backwards: delivered and sent after read record nothing', async () => {
    await sentMessage(wa, '+16505551234', 'wamid.OUT2');
    await postWa(P.waStatus('6000000001', '6100000001', 'wamid.OUT2', 'read'));
    await waitForEvent(s, app.appId, 'message.status', (e) => e.payload.external_message_id === 'wamid.OUT2');
    await postWa(P.waStatus('6000000001', '6100000001', 'wamid.OUT2', 'delivered'));
    await postWa(P.waStatus('6000000001', '6100000001', 'wamid.OUT2', 'sent'));
    await queuesIdle(s);
    expect(await statusesOf('wamid.OUT2')).toEqual(['read']);
    const [row] = await s.deps.sql`SELECT delivery_status FROM outbound_messages WHERE external_message_id = 'wamid.OUT2'`;
    expect(row.delivery_status).toBe('read');
  });

  it('records a repeated status once', async () => {
    await sentMessage(wa, '+16505551234', 'wamid.OUT3');
    for (let i = 0; i < 3; i++) await postWa(P.waStatus('6000000001', '6100000001', 'wamid.OUT3', 'delivered'));
    await waitForEvent(s, app.appId, 'message.status', (e) => e.payload.external_message_id === 'wamid.OUT3');
    await queuesIdle(s);
    expect(await statusesOf('wamid.OUT3')).toEqual(['delivered']);
  });

  it('records Twilio status callbacks; undelivered is failed with its error code; queued is not a status', async () => {
    const outbound = await sentMessage(sms, '+16505550000', 'SMOUT1');
    await postSms(P.twilioStatus('SMOUT1', '+16505550000', 'queued'));
    await postSms(P.twilioStatus('SMOUT1', '+16505550000', 'sent'));
    await waitForEvent(s, app.appId, 'message.status', (e) => e.payload.external_message_id === 'SMOUT1' && e.payload.status === 'sent');
    await postSms(P.twilioStatus('SMOUT1', '+16505550000', 'undelivered', '30003'));
    const failed = await waitForEvent(
      s,
      app.appId,
      'message.status',
      (e) => e.payload.external_message_id === 'SMOUT1' && e.payload.status === 'failed',
    );
    expect(failed.payload).toMatchObject({ origin_event_id: outbound, error: { code: '30003' }, platform: 'sms' });
    await queuesIdle(s);
    expect(await statusesOf('SMOUT1')).toEqual(['sent', 'failed']);
  });

  it('records a status for a message the gateway never sent, without origin, after a short wait for our own send', async () => {
    await postWa(P.waStatus('6000000001', '6100000001', 'wamid.FOREIGN', 'delivered'));
    const e = await waitForEvent(s, app.appId, 'message.status', (x) => x.payload.external_message_id === 'wamid.FOREIGN', 15_000);
    expect([e.payload.origin_event_id, e.origin_event_id]).toEqual([null, null]);
  });

  it('resolves Messenger read watermarks to the messages sent before them', async () => {
    const t0 = Date.now() - 60_000;
    const early1 = await sentMessage(fb, 'PSID-W', 'm_w1', new Date(t0));
    const early2 = await sentMessage(fb, 'PSID-W', 'm_w2', new Date(t0 + 1000));
    await sentMessage(fb, 'PSID-W', 'm_w3', new Date(t0 + 10_000));
    await sentMessage(fb, 'PSID-OTHER', 'm_other', new Date(t0));
    expect((await postFb(P.fbRead('page', '6200000001', 'PSID-W', t0 + 5000))).status).toBe(200);
    await waitForEvents(s, app.appId, 'message.status', 1);
    await queuesIdle(s);
    const reads = (await eventsOf(s, app.appId, 'message.status')).filter(
      (e) => e.payload.status === 'read' && String(e.payload.external_message_id).startsWith('m_'),
    );
    expect(reads.map((e) => [e.payload.external_message_id, e.origin_event_id]).sort()).toEqual([
      ['m_w1', early1],
      ['m_w2', early2],
    ]);
    // A later delivery watermark does not undo the reads; it only covers what is still behind it.
    await postFb(P.fbDelivery('page', '6200000001', 'PSID-W', t0 + 20_000));
    await waitForEvent(s, app.appId, 'message.status', (e) => e.payload.external_message_id === 'm_w3');
    await queuesIdle(s);
    expect(await statusesOf('m_w1')).toEqual(['read']);
    expect(await statusesOf('m_w3')).toEqual(['delivered']);
    expect(await statusesOf('m_other')).toEqual([]);
  });
});

describe('message.reaction', () => {
  it('links a reaction to our own message through its outbound event, and records removal', async () => {
    const outbound = await sentMessage(wa, '+16505551234', 'wamid.OUT-R');
    await postWa(P.waReaction('6000000001', '6100000001', '16505551234', 'wamid.R1', 'wamid.OUT-R', '👍'));
    const added = await waitForEvent(s, app.appId, 'message.reaction', (e) => e.payload.reaction.message_id === 'wamid.OUT-R');
    expect(added.payload).toMatchObject({
      reaction: { emoji: '👍', message_id: 'wamid.OUT-R' },
      action: 'added',
      origin_event_id: outbound,
      platform: 'whatsapp',
    });
    expect(added.origin_event_id).toBe(outbound);
    expect((await edgesOf(s, added.id)).map((e) => [e.edge_type, e.external_id])).toEqual([['sent_by', '16505551234']]);
    await postWa(P.waReaction('6000000001', '6100000001', '16505551234', 'wamid.R2', 'wamid.OUT-R'));
    const removed = await waitForEvent(
      s,
      app.appId,
      'message.reaction',
      (e) => e.payload.reaction.message_id === 'wamid.OUT-R' && e.payload.action === 'removed',
    );
    expect(removed.origin_event_id).toBe(outbound);
  });

  it("links a reaction to the user's own inbound message", async () => {
    await postWa(P.waText('6000000001', '6100000001', '16505551234', 'wamid.IN-R', 'react to me'));
    const inbound = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.external_message_id === 'wamid.IN-R');
    await postWa(P.waReaction('6000000001', '6100000001', '16505551234', 'wamid.R3', 'wamid.IN-R', '❤️'));
    const reaction = await waitForEvent(s, app.appId, 'message.reaction', (e) => e.payload.reaction.message_id === 'wamid.IN-R');
    expect(reaction.origin_event_id).toBe(inbound.id);
  });

  it('finds our Telegram message stored under its bare message_id from a (chat, message) reaction', async () => {
    const chat = String(P.tgChat.id);
    const outbound = await sentMessage(tg, chat, '4242');
    await postTg(P.tgReaction(8001, 4242, [], ['🔥']));
    const r = await waitForEvent(s, app.appId, 'message.reaction', (e) => e.payload.reaction.message_id === `${chat}:4242`);
    expect([r.payload.action, r.payload.reaction.emoji, r.origin_event_id]).toEqual(['added', '🔥', outbound]);
  });

  it('records Slack reactions by name on (channel, ts)', async () => {
    await postSlack(P.slackReaction('EvR1', 'C5', 'U5', '1700000100.000100', 'tada'));
    const r = await waitForEvent(s, app.appId, 'message.reaction', (e) => e.payload.reaction.message_id === 'C5:1700000100.000100');
    expect(r.payload).toMatchObject({ reaction: { emoji: 'tada' }, action: 'added', platform: 'slack' });
  });
});

describe('edited messages', () => {
  it('records a Telegram edit as message.inbound with edited: true, the same external id, and the original as origin', async () => {
    await postTg(P.tgText(8100, 810, 'teh text'));
    const original = await waitForEvent(
      s,
      app.appId,
      'message.inbound',
      (e) => e.payload.external_message_id === `${P.tgChat.id}:810` && !e.payload.edited,
    );
    await postTg(P.tgEdited(8101, 810, 'the text'));
    const edit = await waitForEvent(
      s,
      app.appId,
      'message.inbound',
      (e) => e.payload.external_message_id === `${P.tgChat.id}:810` && e.payload.edited === true,
    );
    expect(edit.payload.message.text).toBe('the text');
    expect(edit.origin_event_id).toBe(original.id);
    expect(edit.conversation_id).toBe(original.conversation_id);
  });

  it('records a Slack message_changed as an edit', async () => {
    await postSlack(P.slackMessage('EvE1', 'C6', 'U6', '1700000200.000100', 'draft'));
    await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.external_message_id === 'C6:1700000200.000100');
    await postSlack(P.slackEdit('EvE2', 'C6', 'U6', '1700000200.000100', 'final'));
    const edit = await waitForEvent(
      s,
      app.appId,
      'message.inbound',
      (e) => e.payload.external_message_id === 'C6:1700000200.000100' && e.payload.edited === true,
    );
    expect(edit.payload.message.text).toBe('final');
  });
});

describe('reply window bookkeeping', () => {
  it('fails a WhatsApp send fast with REPLY_WINDOW_CLOSED after 24 h of silence, and an inbound message reopens it', async () => {
    await postWa(P.waText('6000000001', '6100000001', '4930123456', 'wamid.WIN1', 'hi'));
    const inbound = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.external_message_id === 'wamid.WIN1');
    const [conv] = await s.deps.sql`SELECT last_inbound_at FROM conversations WHERE id = ${inbound.conversation_id}`;
    expect(Math.abs(conv.last_inbound_at.getTime() - Date.now())).toBeLessThan(60_000);

    await s.deps.sql`UPDATE conversations SET last_inbound_at = now() - interval '25 hours' WHERE id = ${inbound.conversation_id}`;
    const send = () =>
      s.request('POST', '/v1/messages', {
        auth: app,
        body: { platform_connection_id: wa.id, to_external_id: '+4930123456', message: 'late reply' },
      });
    const closed = await send();
    expect(closed.status).toBe(422);
    expect(closed.json.error.code).toBe('REPLY_WINDOW_CLOSED');
    const [{ n }] = await s.deps
      .sql`SELECT count(*)::int AS n FROM outbound_messages WHERE platform_connection_id = ${wa.id} AND to_external_id = '+4930123456'`;
    expect(n).toBe(0);

    await postWa(P.waText('6000000001', '6100000001', '4930123456', 'wamid.WIN2', 'are you there?'));
    await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.external_message_id === 'wamid.WIN2');
    const reopened = await send();
    expect(reopened.json?.error?.code).not.toBe('REPLY_WINDOW_CLOSED');
    expect([201, 202]).toContain(reopened.status);
  });
});

describe('new users under concurrency', () => {
  it('creates the platform user, its user and the conversation once when a new user sends many messages at once', async () => {
    const from = { id: 5550001, is_bot: false, first_name: 'Rush' };
    const chat = { id: 5550001, type: 'private' };
    const n = 24;
    const rs = await Promise.all(Array.from({ length: n }, (_, i) => postTg(P.tgText(9000 + i, 900 + i, `burst ${i}`, { from, chat }))));
    expect(rs.every((r) => r.status === 200)).toBe(true);
    await eventuallyCount(`5550001:`, n);
    const pus = await s.deps
      .sql`SELECT id, user_id FROM platform_users WHERE app_id = ${app.appId} AND platform_connection_id = ${tg.id} AND external_id = '5550001'`;
    expect(pus).toHaveLength(1);
    const [{ users }] = await s.deps
      .sql`SELECT count(DISTINCT p.user_id)::int AS users FROM platform_users p WHERE p.external_id = '5550001'`;
    expect(users).toBe(1);
    const convs = await s.deps.sql`SELECT id FROM conversations WHERE platform_connection_id = ${tg.id} AND external_id = '5550001'`;
    expect(convs).toHaveLength(1);
    const inbound = (await eventsOf(s, app.appId, 'message.inbound')).filter((e) =>
      String(e.payload.external_message_id).startsWith('5550001:'),
    );
    expect(new Set(inbound.map((e) => e.conversation_id))).toEqual(new Set([convs[0].id]));
  });
});

async function eventuallyCount(prefix: string, n: number) {
  await expect
    .poll(
      async () =>
        (await eventsOf(s, app.appId, 'message.inbound')).filter((e) => String(e.payload.external_message_id).startsWith(prefix)).length,
      { timeout: 15_000 },
    )
    .toBe(n);
}

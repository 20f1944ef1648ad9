import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertConversation } from '../../src/identity/platform-users.js';
import { systemEvent } from '../../src/ledger/event-types.js';
import { enqueue, queueFor } from '../../src/queues.js';
import { connect, eventually, SAMPLE_RECIPIENTS, sampleConfigs } from '../helpers/connections.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { DiscordFake } from '../fakes/discord.js';
import { SmtpFake } from '../fakes/email.js';
import { InstagramFake } from '../fakes/instagram.js';
import { MessengerFake } from '../fakes/messenger.js';
import { SlackFake } from '../fakes/slack.js';
import { TwilioFake } from '../fakes/sms.js';
import { TelegramFake } from '../fakes/telegram.js';
import { WhatsappFake } from '../fakes/whatsapp.js';
import { apiFetch } from '../helpers/openapi-contract.js';

let s: TestStack;
let a: AppCredentials;
let fakes: {
  tg: TelegramFake;
  wa: WhatsappFake;
  fb: MessengerFake;
  ig: InstagramFake;
  slack: SlackFake;
  discord: DiscordFake;
  sms: TwilioFake;
  smtp: SmtpFake;
};
const conns: Record<string, { id: string; webhook_url: string }> = {};

beforeAll(async () => {
  fakes = {
    tg: await TelegramFake.start(),
    wa: await WhatsappFake.start(),
    fb: await MessengerFake.start(),
    ig: await InstagramFake.start(),
    slack: await SlackFake.start(),
    discord: await DiscordFake.start(),
    sms: await TwilioFake.start(),
    smtp: await SmtpFake.start({ users: { mailer: 'SECRET-smtp-pass' } }),
  };
  s = await startTestStack({ workers: ['ledger', 'send'], env: { PUBLIC_BASE_URL: 'https://gw.example.com' } });
  a = await s.createApp();
  const configs = sampleConfigs({
    TELEGRAM: fakes.tg.url,
    WHATSAPP: fakes.wa.url,
    MESSENGER: fakes.fb.url,
    INSTAGRAM: fakes.ig.url,
    SLACK: fakes.slack.url,
    DISCORD: fakes.discord.url,
    SMS: fakes.sms.url,
    EMAIL: `smtp://127.0.0.1:${fakes.smtp.port}`,
  });
  for (const [platform, config] of Object.entries(configs)) conns[platform] = await connect(s, a, platform, config);
});
afterAll(async () => {
  await s.close();
  await Promise.all(Object.values(fakes).map((f) => f.close()));
});

const RECIPIENT = SAMPLE_RECIPIENTS;

async function restSend(platform: string, text: string, extra: Record<string, unknown> = {}) {
  return s.request('POST', '/v1/messages', {
    auth: a,
    body: { platform_connection_id: conns[platform].id, to_external_id: RECIPIENT[platform], message: text, ...extra },
  });
}

/** The request (or mail) the platform received for `text`. */
async function received(platform: string, text: string): Promise<unknown> {
  if (platform === 'EMAIL') {
    return eventually(async () => fakes.smtp.received.find((m) => m.parsed.text?.trim() === text), 5000, 'mail');
  }
  const fake = {
    TELEGRAM: fakes.tg,
    WHATSAPP: fakes.wa,
    MESSENGER: fakes.fb,
    INSTAGRAM: fakes.ig,
    SLACK: fakes.slack,
    DISCORD: fakes.discord,
    SMS: fakes.sms,
  }[platform]!;
  const hit = fake.accepted.find((r) => JSON.stringify(r.json ?? r.form ?? {}).includes(text));
  expect(hit, `${platform} fake got "${text}"`).toBeDefined();
  return hit;
}

describe.each(Object.keys(RECIPIENT))('%s through the stack', (platform) => {
  it('REST: 201 sent, the platform got the documented request, message.outbound recorded', async () => {
    const text = `rest hello ${platform}`;
    const r = await restSend(platform, text);
    expect(r.status, r.text).toBe(201);
    expect(r.json.status).toBe('sent');
    expect(r.json.external_message_id).toEqual(expect.any(String));
    const got = (await received(platform, text)) as { json?: any; form?: any; parsed?: any };
    switch (platform) {
      case 'TELEGRAM':
        expect(got.json).toEqual({ chat_id: '31337', text });
        break;
      case 'WHATSAPP':
        expect(got.json).toEqual({
          messaging_product: 'whatsapp',
          recipient_type: 'individual',
          to: '+16505550100',
          type: 'text',
          text: { preview_url: false, body: text },
        });
        break;
      case 'MESSENGER':
      case 'INSTAGRAM':
        expect(got.json).toEqual({ recipient: { id: RECIPIENT[platform] }, messaging_type: 'RESPONSE', message: { text } });
        break;
      case 'SLACK':
        expect(got.json).toEqual({ channel: 'C0GENERAL1', text });
        break;
      case 'DISCORD':
        expect(got.json).toEqual({ content: text });
        break;
      case 'SMS':
        expect(got.form).toEqual({ To: '+14155550100', From: '+15005550006', Body: text, StatusCallback: conns.SMS.webhook_url });
        break;
      case 'EMAIL':
        expect(got.parsed.subject).toBe(text);
        expect(got.parsed.from.value[0].address).toBe('help@example.com');
        break;
    }
    const ev = await s.request('GET', `/v1/events/${r.json.id}`, { auth: a });
    expect(ev.json).toMatchObject({
      event_type: 'message.outbound',
      payload: { platform: platform.toLowerCase(), external_message_id: r.json.external_message_id, message: { text, role: 'assistant' } },
    });
    expect(ev.json.edges.map((e: { edge_type: string }) => e.edge_type).sort()).toEqual(['sent_by', 'sent_to']);
  });

  it('GraphQL: sendMessage succeeds', async () => {
    const text = `graphql hello ${platform}`;
    const r = await s.gql(
      a,
      `mutation($c: ID!, $to: String!, $m: String!) { sendMessage(platformConnectionId: $c, toExternalId: $to, message: $m) { id status { success message externalMessageId } } }`,
      {
        c: conns[platform].id,
        to: RECIPIENT[platform],
        m: text,
      },
    );
    expect(r.json.errors).toBeUndefined();
    expect(r.json.data.sendMessage.status).toMatchObject({ success: true, message: 'sent', externalMessageId: expect.any(String) });
    await received(platform, text);
  });
});

describe('platform refusals through the stack', () => {
  it('WhatsApp 131047 → 422 REPLY_WINDOW_CLOSED with the platform code and text', async () => {
    fakes.wa.windowClosed.add('16505550199');
    const r = await s.request('POST', '/v1/messages', {
      auth: a,
      body: { platform_connection_id: conns.WHATSAPP.id, to_external_id: '+16505550199', message: 'late' },
    });
    expect(r.status).toBe(422);
    expect(r.json.error).toMatchObject({
      code: 'REPLY_WINDOW_CLOSED',
      details: [{ platform_code: 131047, platform_message: expect.stringContaining('Re-engagement') }],
    });
  });

  it('Messenger outside the 24 h window → 422 REPLY_WINDOW_CLOSED; known-closed windows are refused before calling', async () => {
    fakes.fb.windowClosed.add('2400199');
    const r = await s.request('POST', '/v1/messages', {
      auth: a,
      body: { platform_connection_id: conns.MESSENGER.id, to_external_id: '2400199', message: 'x' },
    });
    expect(r.status).toBe(422);
    expect(r.json.error.code).toBe('REPLY_WINDOW_CLOSED');
    // A conversation whose last inbound message is 25 h old: refused without a platform call.
    await upsertConversation(s.deps.sql, {
      appId: a.appId,
      connectionId: conns.MESSENGER.id,
      externalId: '2400198',
      inboundAt: new Date(Date.now() - 25 * 3600_000),
    });
    const before = fakes.fb.server.requests.length;
    const early = await s.request('POST', '/v1/messages', {
      auth: a,
      body: { platform_connection_id: conns.MESSENGER.id, to_external_id: '2400198', message: 'x' },
    });
    expect(early.status).toBe(422);
    expect(early.json.error.code).toBe('REPLY_WINDOW_CLOSED');
    expect(fakes.fb.server.requests.length).toBe(before);
  });

  it('Slack not_in_channel → 422 RECIPIENT_NOT_STARTED; Discord 50007 → 422 RECIPIENT_BLOCKED; Twilio 21610 → 422 RECIPIENT_BLOCKED', async () => {
    fakes.slack.notInChannel.add('C0PRIVATE9');
    fakes.discord.closedDms.add('100000000000000077');
    fakes.sms.optedOut.add('+14155550177');
    const cases: [string, string, string][] = [
      ['SLACK', 'C0PRIVATE9', 'RECIPIENT_NOT_STARTED'],
      ['DISCORD', '100000000000000077', 'RECIPIENT_BLOCKED'],
      ['SMS', '+14155550177', 'RECIPIENT_BLOCKED'],
    ];
    for (const [platform, to, code] of cases) {
      const r = await s.request('POST', '/v1/messages', {
        auth: a,
        body: { platform_connection_id: conns[platform].id, to_external_id: to, message: 'x' },
      });
      expect(r.status, `${platform}: ${r.text}`).toBe(422);
      expect(r.json.error.code).toBe(code);
    }
  });

  it('recipient shapes are checked per platform before queueing (E.164 for SMS and WhatsApp)', async () => {
    for (const [platform, to] of [
      ['SMS', '4155550100'],
      ['WHATSAPP', 'ann'],
      ['DISCORD', 'general'],
      ['EMAIL', 'not-an-address'],
      ['INSTAGRAM', '@handle'],
    ]) {
      const r = await s.request('POST', '/v1/messages', {
        auth: a,
        body: { platform_connection_id: conns[platform].id, to_external_id: to, message: 'x' },
      });
      expect(r.status, platform).toBe(400);
      expect(r.json.error.code).toBe('INVALID_RECIPIENT');
    }
  });

  it('text limits per platform: 2000 Discord, 1000 Instagram, 1600 SMS, 4096 WhatsApp', async () => {
    for (const [platform, limit] of [
      ['DISCORD', 2000],
      ['INSTAGRAM', 1000],
      ['SMS', 1600],
      ['WHATSAPP', 4096],
    ] as const) {
      const r = await restSend(platform, 'a'.repeat(limit + 1));
      expect(r.status, platform).toBe(400);
      expect(r.json.error.code).toBe('MESSAGE_TOO_LONG');
    }
  });
});

describe('files and e-mail threading', () => {
  async function upload(name: string, type: string, data: Buffer) {
    const form = new FormData();
    form.set('file', new Blob([new Uint8Array(data)], { type }), name);
    const r = await apiFetch(`${s.base}/v1/files`, { method: 'POST', headers: a.headers, body: form });
    expect(r.status).toBe(201);
    return (await r.json()) as { id: string; mime_type: string };
  }
  // A 1x1 PNG: sniffed as image/png whatever the client declares.
  const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');

  it('Telegram: file_ids go out with sendPhoto (by sniffed type) carrying the text as caption; the event links the file', async () => {
    const f = await upload('pic.bin', 'application/octet-stream', PNG);
    expect(f.mime_type).toBe('image/png');
    const r = await restSend('TELEGRAM', 'a picture', { file_ids: [f.id] });
    expect(r.status, r.text).toBe(201);
    const photo = fakes.tg.accepted.find((q) => q.path.endsWith('/sendPhoto'))!;
    expect(photo.form).toEqual({ chat_id: '31337', caption: 'a picture' });
    expect(photo.files?.[0].data).toEqual(PNG);
    const ev = await s.request('GET', `/v1/events/${r.json.id}`, { auth: a });
    expect(ev.json.edges).toContainEqual(
      expect.objectContaining({ edge_type: 'attachment', target_node_type: 'file', target_node_id: f.id }),
    );
  });

  it('WhatsApp uploads the media then sends it by id; Slack uploads externally; e-mail attaches', async () => {
    const f = await upload('pic.png', 'image/png', PNG);
    expect((await restSend('WHATSAPP', 'wa pic', { file_ids: [f.id] })).status).toBe(201);
    const waSend = fakes.wa.accepted.find((q) => q.json?.type === 'image')!;
    expect(fakes.wa.media.get(waSend.json.image.id)?.data).toEqual(PNG);
    expect(waSend.json.image.caption).toBe('wa pic');

    expect((await restSend('SLACK', 'slack pic', { file_ids: [f.id] })).status).toBe(201);
    const done = fakes.slack.accepted.find((q) => q.path === '/api/files.completeUploadExternal')!;
    expect(fakes.slack.uploads.get(done.json.files[0].id)?.data).toEqual(PNG);

    expect((await restSend('EMAIL', 'mail pic', { file_ids: [f.id] })).status).toBe(201);
    const mail = await eventually(async () => fakes.smtp.received.find((m) => m.parsed.text?.trim() === 'mail pic'), 5000, 'mail');
    expect(mail.parsed.attachments[0].content).toEqual(PNG);
  });

  it('gives an e-mail and a send with files their own job from the start, and a plain send a batch', async () => {
    // What a batch would only claim and give back (an e-mail's thread, files uploaded first)
    // goes by its own job at once: no batch job, no claim, no release.
    const f = await upload('own.png', 'image/png', PNG);
    const sent = [
      await restSend('EMAIL', 'mail alone'),
      await restSend('TELEGRAM', 'picture alone', { file_ids: [f.id] }),
      // Another chat: one sent to within Telegram's second per chat waits for its slot in its own job.
      await restSend('TELEGRAM', 'plain in a batch', { to_external_id: '31338' }),
    ];
    expect(sent.map((r) => r.status)).toEqual([201, 201, 201]);
    const jobs = await queueFor(s.deps.queues, 'send').getJobs(['completed', 'failed', 'active', 'waiting', 'delayed']);
    const jobsOf = (id: string) =>
      jobs
        .filter((j) => (j.data.kind === 'batch' ? j.data.messages.some((m: { id: string }) => m.id === id) : j.data.message_id === id))
        .map((j) => (j.data.kind === 'batch' ? 'batch' : 'own'));
    expect(sent.map((r) => jobsOf(r.json.id))).toEqual([['own'], ['own'], ['batch']]);
  });

  it('refuses files on a text-only platform and unknown file ids with 400', async () => {
    const f = await upload('pic.png', 'image/png', PNG);
    const r = await restSend('SMS', 'x', { file_ids: [f.id] });
    expect(r.status).toBe(400);
    expect(r.json.error.details[0].path).toEqual(['file_ids']);
    const unknown = await restSend('TELEGRAM', 'x', { file_ids: ['00000000-0000-4000-8000-000000000000'] });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.details[0].path).toEqual(['file_ids', 0]);
  });

  it('e-mail: an optional subject, and a reply threads onto the latest inbound e-mail of the conversation', async () => {
    const conversationId = await upsertConversation(s.deps.sql, {
      appId: a.appId,
      connectionId: conns.EMAIL.id,
      externalId: 'bob@example.org',
    });
    const inboundId = crypto.randomUUID();
    await enqueue(s.deps.queues, 'ledger', {
      event: {
        id: inboundId,
        app_id: a.appId,
        ...systemEvent('message.inbound', {
          message: { text: 'Where is my order?', role: 'user', type: 'text' },
          platform: 'email',
          external_message_id: '<q-1@mail.example.org>',
          conversation_id: conversationId,
          timestamp: new Date().toISOString(),
        }),
        edges: [],
        attachments: [],
        conversation_id: conversationId,
        platform_connection_id: conns.EMAIL.id,
      },
    });
    await eventually(
      async () => (await s.request('GET', `/v1/events/${inboundId}`, { auth: a })).status === 200 || undefined,
      5000,
      'inbound event',
    );
    const r = await s.request('POST', '/v1/messages', {
      auth: a,
      body: {
        platform_connection_id: conns.EMAIL.id,
        to_external_id: 'bob@example.org',
        message: 'On its way.',
        subject: 'Re: your order',
      },
    });
    expect(r.status, r.text).toBe(201);
    const mail = await eventually(async () => fakes.smtp.received.find((m) => m.parsed.text?.trim() === 'On its way.'), 5000, 'reply');
    expect(mail.parsed.subject).toBe('Re: your order');
    expect(mail.parsed.inReplyTo).toBe('<q-1@mail.example.org>');
    expect(mail.user).toBe('mailer');
  });
});

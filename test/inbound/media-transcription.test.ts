import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConnectionById } from '../../src/connections/connections.js';
import { recordMessage } from '../../src/inbound/records.js';
import { startFakeMediaServer, type FakeMediaServer } from '../fakes/inbound/media-server.js';
import * as P from '../fakes/inbound/payloads.js';
import { emailHeaders, form, metaHeaders, slackHeaders, telegramHeaders, twilioHeaders } from '../fakes/inbound/signers.js';
import { startFakeTranscription, type FakeTranscriptionServer } from '../fakes/inbound/transcription-server.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { connect, eventsAbout, postWebhook, queuesIdle, waitForEvent, type CreatedConnection } from './helpers.js';
import { apiFetch } from '../helpers/openapi-contract.js';

/** The smallest valid PNG (1×1): its bytes are sniffed as image/png. */
const PNG = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360000002000100ffff03000006000557bfabd40000000049454e44ae426082',
  'hex',
);
/** An Ogg page header followed by padding: enough for the transcription path (the fake does not decode it). */
const OGG = Buffer.concat([Buffer.from('OggS'), Buffer.alloc(200, 1)]);

const TG_TOKEN = '424242:media-bot-token';
const WA_TOKEN = 'wa-media-token';

let s: TestStack;
let app: AppCredentials;
let media: FakeMediaServer;
let tr: FakeTranscriptionServer;
let tg: CreatedConnection;
let wa: CreatedConnection;

beforeAll(async () => {
  media = await startFakeMediaServer({ telegramToken: TG_TOKEN, whatsappToken: WA_TOKEN });
  tr = await startFakeTranscription();
  s = await startTestStack({
    workers: ['inbound', 'ledger', 'transcription'],
    env: {
      TRANSCRIPTION_API_BASE: tr.base,
      TRANSCRIPTION_API_KEY: 'tr-key',
      TRANSCRIPTION_MODEL: 'whisper-large-v3',
      TRANSCRIPTION_RETRY_BASE_MS: '20',
    },
  });
  app = await s.createApp();
  tg = await connect(s, app, 'TELEGRAM', { bot_token: TG_TOKEN, api_base_url: media.base });
  wa = await connect(s, app, 'WHATSAPP', {
    access_token: WA_TOKEN,
    phone_number_id: '5100000001',
    business_account_id: '5000000001',
    app_secret: 'wa-secret',
    verify_token: 'v',
    api_base_url: media.base,
  });
});
afterAll(async () => {
  await s?.close();
  await media?.close();
  await tr?.close();
});

const postTelegram = (update: object) => postWebhook(s, tg.path, JSON.stringify(update), telegramHeaders());
const postWhatsApp = (payload: object) => {
  const body = JSON.stringify(payload);
  return postWebhook(s, wa.path, body, metaHeaders('wa-secret', body));
};

async function fileContent(id: string): Promise<Buffer> {
  const r = await apiFetch(`${s.base}/v1/files/${id}/content`, { headers: app.headers });
  expect(r.status).toBe(200);
  return Buffer.from(await r.arrayBuffer());
}

describe('inbound media', () => {
  it('downloads a Telegram photo through getFile into a file listed in the event', async () => {
    media.addFile('photo-large', PNG, 'image/jpeg');
    expect((await postTelegram(P.tgPhoto(5001, 501, 'my cat'))).status).toBe(200);
    const event = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.external_message_id === `${P.tgChat.id}:501`);
    expect(event.payload.message).toMatchObject({
      type: 'image',
      text: 'my cat',
      caption: 'my cat',
      media: { id: expect.any(String), mime_type: 'image/png', url: expect.stringMatching(/^\/v1\/files\//) },
    });
    expect(event.attachments).toEqual([
      expect.objectContaining({ file_id: event.payload.message.media.id, mime_type: 'image/png', size_bytes: PNG.length, kind: 'image' }),
    ]);
    expect(await fileContent(event.payload.message.media.id)).toEqual(PNG);
    expect(media.requests.map((r) => r.line)).toContain(`GET /bot${TG_TOKEN}/getFile`);
  });

  it('downloads WhatsApp media by id with the bearer token, right away', async () => {
    media.addFile('wa-media-1', PNG, 'image/png');
    expect((await postWhatsApp(P.waImage('5000000001', '5100000001', '4917600000', 'wamid.IMG1', 'wa-media-1', 'receipt'))).status).toBe(
      200,
    );
    const event = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.external_message_id === 'wamid.IMG1');
    expect(event.payload.message).toMatchObject({ type: 'image', caption: 'receipt', media: { mime_type: 'image/png' } });
    expect(await fileContent(event.payload.message.media.id)).toEqual(PNG);
    const waRequests = media.requests.filter((r) => r.line.includes('wa-media-1') || r.line.includes('wa-download'));
    expect(waRequests.map((r) => r.auth)).toEqual([`Bearer ${WA_TOKEN}`, `Bearer ${WA_TOKEN}`]);
  });

  it('downloads URL media of Messenger, Slack (bearer), Twilio and inline e-mail attachments', async () => {
    media.addFile('fb-img', PNG, 'image/png');
    media.addFile('slack-file', PNG, 'image/png');
    media.addFile('mms-img', PNG, 'image/png');
    const fb = await connect(s, app, 'MESSENGER', { page_access_token: 't', page_id: '5200000001', app_secret: 'fb-s', verify_token: 'v' });
    const slack = await connect(s, app, 'SLACK', { bot_token: 'xoxb-media', signing_secret: 'ss' });
    const sms = await connect(s, app, 'SMS', { account_sid: 'AC0123456789abcdef0123456789abcdef', auth_token: 'tw', from: '+15550009999' });
    const mail = await connect(s, app, 'EMAIL', {
      smtp_url: 'smtp://127.0.0.1:1',
      from: 'help@example.com',
      inbound_secret: 'mail-secret-0123456789',
    });

    const fbBody = JSON.stringify(P.fbAttachment('page', '5200000001', 'PSID-M', 'm_media', 'image', media.urlOf('fb-img')));
    expect((await postWebhook(s, fb.path, fbBody, metaHeaders('fb-s', fbBody))).status).toBe(200);
    const files = [{ id: 'F1', name: 'shot.png', mimetype: 'image/png', url_private_download: media.urlOf('slack-file') }];
    const slackBody = JSON.stringify(P.slackMessage('EvMedia', 'C9', 'U9', '1700000009.000100', 'see', { subtype: 'file_share', files }));
    expect((await postWebhook(s, slack.path, slackBody, slackHeaders('ss', slackBody))).status).toBe(200);
    const params = P.twilioInbound('MMmedia', '+16505550000', '+15550009999', 'pic', [{ url: media.urlOf('mms-img'), type: 'image/png' }]);
    expect((await postWebhook(s, sms.path, form(params), twilioHeaders('tw', sms.webhookUrl, params))).status).toBe(200);
    const mailBody = JSON.stringify(
      P.email('media@mail', 'f@example.org', 'attached', {
        attachments: [{ filename: 'a.png', content_type: 'image/png', content_base64: PNG.toString('base64') }],
      }),
    );
    expect((await postWebhook(s, mail.path, mailBody, emailHeaders('mail-secret-0123456789', mailBody))).status).toBe(200);

    for (const id of ['m_media', 'C9:1700000009.000100', 'MMmedia', '<media@mail>']) {
      const event = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.external_message_id === id);
      expect(event.payload.message.media.mime_type, id).toBe('image/png');
      expect(await fileContent(event.payload.message.media.id)).toEqual(PNG);
    }
    expect(media.requests.find((r) => r.line === 'GET /cdn/slack-file')?.auth).toBe('Bearer xoxb-media');
    expect(media.requests.find((r) => r.line === 'GET /cdn/mms-img')?.auth).toBe(
      `Basic ${Buffer.from('AC0123456789abcdef0123456789abcdef:tw').toString('base64')}`,
    );
  });

  it('retries a failed download, and on the last attempt keeps the message without its file', async () => {
    const conn = (await loadConnectionById(s.deps, tg.id))!;
    const { files, linkCodes } = s.workers!.services;
    const services = { files, linkCodes };
    const record = {
      kind: 'message' as const,
      externalMessageId: 'lost-media:1',
      conversation: { externalId: '77' },
      sender: { externalId: '77' },
      message: { text: '', type: 'image' as const, media: { platformFileId: 'not-there' } },
      occurredAt: new Date().toISOString(),
    };
    await expect(recordMessage({ deps: s.deps, ...services, conn, attempt: 0, finalAttempt: false }, record)).rejects.toThrow(
      /getFile failed/,
    );
    await recordMessage({ deps: s.deps, ...services, conn, attempt: 9, finalAttempt: true }, record);
    const event = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.external_message_id === 'lost-media:1');
    expect(event.payload.message.media).toEqual({ id: null, mime_type: null, url: null, error: 'telegram getFile failed' });
  });
});

describe('audio transcription', () => {
  it('holds the event until the transcript is there, then records it with the transcript', async () => {
    media.addFile('voice-1', OGG, 'audio/ogg');
    let release!: () => void;
    tr.gate = new Promise<void>((r) => (release = r));
    tr.answer = { text: 'please call me back', language: 'english', duration: 3.2 };
    const calls = tr.calls.length;
    expect((await postTelegram(P.tgVoice(5101, 601, 'voice-1'))).status).toBe(200);

    // The provider has the audio and is still working: the inbound work is done, yet no event exists.
    await expect.poll(() => tr.calls.length, { timeout: 10_000 }).toBe(calls + 1);
    await queuesIdle(s, 10_000, ['inbound', 'ledger']);
    expect(await eventsAbout(s, app.appId, 'message.inbound', `${P.tgChat.id}:601`)).toEqual([]);

    release();
    tr.gate = undefined;
    const event = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.external_message_id === `${P.tgChat.id}:601`);
    expect(event.payload.message).toMatchObject({
      type: 'voice',
      transcript: 'please call me back',
      transcription: { status: 'completed', language: 'english', duration_ms: expect.any(Number), audio_duration_ms: 3200 },
      media: { mime_type: expect.stringMatching(/\/ogg$/) },
    });
    // The stored name (voice-1.bin, from the platform's file path) has no audio extension: one is derived from the type.
    expect(tr.calls[calls]).toMatchObject({
      model: 'whisper-large-v3',
      responseFormat: 'verbose_json',
      filename: 'audio.ogg',
      fileBytes: OGG.length,
      authorization: 'Bearer tr-key',
    });
  });

  it('transcribes WhatsApp voice notes too', async () => {
    media.addFile('wa-voice', OGG, 'audio/ogg; codecs=opus');
    tr.answer = { text: 'hola', language: 'spanish', duration: 1 };
    expect((await postWhatsApp(P.waAudio('5000000001', '5100000001', '4917600000', 'wamid.VOICE', 'wa-voice'))).status).toBe(200);
    const event = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.external_message_id === 'wamid.VOICE');
    expect(event.payload.message).toMatchObject({
      type: 'voice',
      transcript: 'hola',
      transcription: { status: 'completed', language: 'spanish' },
    });
  });

  it('retries a provider outage with backoff, then records the event with transcription failed', async () => {
    media.addFile('voice-2', OGG, 'audio/ogg');
    tr.answer = { status: 503 };
    const calls = tr.calls.length;
    expect((await postTelegram(P.tgVoice(5102, 602, 'voice-2'))).status).toBe(200);
    const event = await waitForEvent(
      s,
      app.appId,
      'message.inbound',
      (e) => e.payload.external_message_id === `${P.tgChat.id}:602`,
      20_000,
    );
    expect(tr.calls.length - calls).toBe(5);
    expect(event.payload.message.transcription).toMatchObject({
      status: 'failed',
      attempts: 5,
      error: 'transcription provider answered HTTP 503',
    });
    expect(event.payload.message.transcript).toBeUndefined();
    expect(event.payload.message.media.id).toEqual(expect.any(String));
  });

  it('records at once with transcription failed when the provider refuses the audio (4xx)', async () => {
    media.addFile('voice-3', OGG, 'audio/ogg');
    tr.answer = { status: 400 };
    const calls = tr.calls.length;
    expect((await postTelegram(P.tgVoice(5103, 603, 'voice-3'))).status).toBe(200);
    const event = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.external_message_id === `${P.tgChat.id}:603`);
    expect(tr.calls.length - calls).toBe(1);
    expect(event.payload.message.transcription).toMatchObject({ status: 'failed', attempts: 1 });
  });
});

describe('audio without a transcription provider', () => {
  let bare: TestStack;
  afterAll(() => bare?.close());

  it('records audio events at once with transcription skipped', async () => {
    bare = await startTestStack({ workers: ['inbound', 'ledger', 'transcription'] });
    const owner = await bare.createApp();
    const conn = await connect(bare, owner, 'TELEGRAM', { bot_token: TG_TOKEN, api_base_url: media.base });
    media.addFile('voice-4', OGG, 'audio/ogg');
    const calls = tr.calls.length;
    expect((await postWebhook(bare, conn.path, JSON.stringify(P.tgVoice(5201, 701, 'voice-4')), telegramHeaders())).status).toBe(200);
    const event = await waitForEvent(bare, owner.appId, 'message.inbound', (e) => e.payload.external_message_id === `${P.tgChat.id}:701`);
    expect(event.payload.message).toMatchObject({ type: 'voice', transcription: { status: 'skipped' }, media: { id: expect.any(String) } });
    expect(tr.calls.length).toBe(calls);
  });
});

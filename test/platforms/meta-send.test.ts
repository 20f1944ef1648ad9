import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { instagramSend } from '../../src/platforms/instagram/send.js';
import { messengerSend } from '../../src/platforms/messenger/send.js';
import { whatsappSend } from '../../src/platforms/whatsapp/send.js';
import { InstagramFake } from '../fakes/instagram.js';
import { MessengerFake } from '../fakes/messenger.js';
import { WhatsappFake } from '../fakes/whatsapp.js';

const ctx = { timeoutMs: 2000 };
let wa: WhatsappFake;
let fb: MessengerFake;
let ig: InstagramFake;

beforeAll(async () => {
  wa = await WhatsappFake.start({ accessToken: 'wa-token' });
  fb = await MessengerFake.start({ accessToken: 'page-token' });
  ig = await InstagramFake.start({ accessToken: 'ig-token' });
});
afterAll(async () => {
  await Promise.all([wa.close(), fb.close(), ig.close()]);
});
beforeEach(() => {
  for (const f of [wa, fb, ig]) f.server.reset();
});

const waConfig = () => ({
  access_token: 'wa-token',
  phone_number_id: '1055',
  business_account_id: '2077',
  app_secret: 'app-secret',
  verify_token: 'verify',
  api_base_url: wa.url,
});

describe('WhatsApp send', () => {
  it('posts the documented text body with a bearer token and answers the wamid and wa_id', async () => {
    const out = await whatsappSend.send(waConfig(), { to: '+16505551234', text: 'hello' }, ctx);
    expect(out).toMatchObject({ ok: true, externalMessageId: expect.stringMatching(/^wamid\./), recipientId: '16505551234' });
    const [r] = wa.server.requests;
    expect(r.path).toBe('/v21.0/1055/messages');
    expect(r.headers.authorization).toBe('Bearer wa-token');
    expect(r.json).toEqual({
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: '+16505551234',
      type: 'text',
      text: { preview_url: false, body: 'hello' },
    });
  });

  it('uses the configured api_version', async () => {
    await whatsappSend.send({ ...waConfig(), api_version: 'v19.0' }, { to: '16505551234', text: 'hi' }, ctx);
    expect(wa.server.requests[0].path).toBe('/v19.0/1055/messages');
  });

  it('maps 131047 to REPLY_WINDOW_CLOSED (not retried), with the platform code and text', async () => {
    wa.windowClosed.add('16505550000');
    const out = await whatsappSend.send(waConfig(), { to: '+16505550000', text: 'late' }, ctx);
    expect(out).toMatchObject({
      ok: false,
      error: {
        code: 'REPLY_WINDOW_CLOSED',
        retryable: false,
        platformCode: 131047,
        platformMessage: expect.stringContaining('Re-engagement message'),
      },
    });
  });

  it('maps 131026 to PLATFORM_REJECTED, 130429 and 131056 to PLATFORM_RATE_LIMITED with a wait', async () => {
    wa.undeliverable.add('16505550001');
    expect(await whatsappSend.send(waConfig(), { to: '16505550001', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_REJECTED', platformCode: 131026 },
    });
    for (const [code, wait] of [
      [130429, 1000],
      [131056, 6000],
      [131048, 60000],
      [80007, 60000],
      [4, 60000],
    ]) {
      wa.server.script(1, { status: 400, body: { error: { message: `(#${code}) limit`, type: 'OAuthException', code, fbtrace_id: 'x' } } });
      expect(await whatsappSend.send(waConfig(), { to: '16505550002', text: 'x' }, ctx)).toMatchObject({
        ok: false,
        error: { code: 'PLATFORM_RATE_LIMITED', retryable: true, retryAfterMs: wait, platformCode: code },
      });
    }
  });

  it('maps a bad token (190) to PLATFORM_AUTH_FAILED and Graph transient codes / 5xx to PLATFORM_UNAVAILABLE', async () => {
    expect(await whatsappSend.send({ ...waConfig(), access_token: 'wrong' }, { to: '16505550003', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_AUTH_FAILED', platformCode: 190 },
    });
    wa.server.script(1, {
      status: 500,
      body: { error: { message: 'An unknown error occurred', type: 'OAuthException', code: 1, fbtrace_id: 'x' } },
    });
    expect(await whatsappSend.send(waConfig(), { to: '16505550003', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_UNAVAILABLE', retryable: true },
    });
    wa.server.script(1, { status: 503, body: 'upstream down' });
    expect(await whatsappSend.send(waConfig(), { to: '16505550003', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_UNAVAILABLE', retryable: true },
    });
  });

  it('branches on the Graph code, not the HTTP status', async () => {
    // A window-closed error arriving with an unusual status is still a closed window.
    wa.server.script(1, {
      status: 403,
      body: { error: { message: '(#131047) Re-engagement message', code: 131047, type: 'OAuthException' } },
    });
    expect(await whatsappSend.send(waConfig(), { to: '16505550004', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'REPLY_WINDOW_CLOSED' },
    });
  });

  it('uploads a file to /media and sends it by id with the text as caption', async () => {
    const out = await whatsappSend.send(
      waConfig(),
      { to: '16505550005', text: 'see', files: [{ filename: 'p.jpg', mimeType: 'image/jpeg', data: Buffer.from('jpg') }] },
      ctx,
    );
    expect(out.ok).toBe(true);
    const [upload, message] = wa.server.requests;
    expect(upload.path).toBe('/v21.0/1055/media');
    expect(upload.form).toEqual({ messaging_product: 'whatsapp', type: 'image/jpeg' });
    expect(upload.files?.[0]).toMatchObject({ field: 'file', filename: 'p.jpg', data: Buffer.from('jpg') });
    const mediaId = [...wa.media.keys()][0];
    expect(message.json).toEqual({
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: '16505550005',
      type: 'image',
      image: { id: mediaId, caption: 'see' },
    });
  });

  it('sends the text first when the first file is audio (audio takes no caption); documents keep their filename', async () => {
    await whatsappSend.send(
      waConfig(),
      {
        to: '16505550006',
        text: 'listen',
        files: [
          { filename: 'a.ogg', mimeType: 'audio/ogg', data: Buffer.from('a') },
          { filename: 'c.csv', mimeType: 'text/csv', data: Buffer.from('c') },
        ],
      },
      ctx,
    );
    const sends = wa.server.requests.filter((r) => r.path.endsWith('/messages')).map((r) => r.json);
    expect(sends.map((s) => s.type)).toEqual(['text', 'audio', 'document']);
    expect(sends[1].audio.caption).toBeUndefined();
    expect(sends[2].document.filename).toBe('c.csv');
  });

  it('checks recipients (international numbers, plus optional) and validates config', () => {
    expect(whatsappSend.checkRecipient('+16505551234')).toBeUndefined();
    expect(whatsappSend.checkRecipient('16505551234')).toBeUndefined();
    expect(whatsappSend.checkRecipient('0650555')).toBeDefined();
    expect(whatsappSend.checkRecipient('abc')).toBeDefined();
    expect(whatsappSend.maxTextLength).toBe(4096);
    const { api_base_url: _u, ...minimal } = waConfig();
    expect(whatsappSend.configSchema.safeParse(minimal).success).toBe(true);
    const missing = whatsappSend.configSchema.safeParse({ access_token: 'x' });
    expect(missing.success).toBe(false);
    expect(missing.error!.issues.map((i) => i.path[0]).sort()).toEqual([
      'app_secret',
      'business_account_id',
      'phone_number_id',
      'verify_token',
    ]);
    expect(whatsappSend.secretFields).toEqual(['access_token', 'app_secret', 'verify_token']);
  });
});

describe('Messenger send', () => {
  const config = () => ({ page_access_token: 'page-token', page_id: '3001', app_secret: 's', verify_token: 'v', api_base_url: fb.url });

  it('posts {recipient, messaging_type RESPONSE, message{text}} and answers message_id', async () => {
    const out = await messengerSend.send(config(), { to: '99001', text: 'hello' }, ctx);
    expect(out).toMatchObject({ ok: true, externalMessageId: expect.stringMatching(/^m_/) });
    const [r] = fb.server.requests;
    expect(r.path).toBe('/v21.0/3001/messages');
    expect(r.headers.authorization).toBe('Bearer page-token');
    expect(r.json).toEqual({ recipient: { id: '99001' }, messaging_type: 'RESPONSE', message: { text: 'hello' } });
  });

  it('maps outside-the-window (10/2018278) to REPLY_WINDOW_CLOSED, 551 to RECIPIENT_BLOCKED, 2018001 to INVALID_RECIPIENT, 190 to PLATFORM_AUTH_FAILED', async () => {
    fb.windowClosed.add('99002');
    fb.unavailable.add('99003');
    fb.unknownUsers.add('99004');
    expect(await messengerSend.send(config(), { to: '99002', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'REPLY_WINDOW_CLOSED', platformCode: 10 },
    });
    expect(await messengerSend.send(config(), { to: '99003', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'RECIPIENT_BLOCKED', platformCode: 551 },
    });
    expect(await messengerSend.send(config(), { to: '99004', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'INVALID_RECIPIENT' },
    });
    expect(await messengerSend.send({ ...config(), page_access_token: 'bad' }, { to: '99001', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_AUTH_FAILED' },
    });
  });

  it('maps page call limits (32, 613) to PLATFORM_RATE_LIMITED', async () => {
    fb.server.script(1, {
      status: 400,
      body: { error: { message: '(#613) Calls to this api have exceeded the rate limit.', type: 'OAuthException', code: 613 } },
    });
    expect(await messengerSend.send(config(), { to: '99001', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_RATE_LIMITED', retryable: true },
    });
  });

  it('takes page-scoped ids only, 2000 characters, no files', () => {
    expect(messengerSend.checkRecipient('1234567890')).toBeUndefined();
    expect(messengerSend.checkRecipient('+1234')).toBeDefined();
    expect(messengerSend.maxTextLength).toBe(2000);
    expect(messengerSend.acceptsFiles).toBe(false);
  });
});

describe('Instagram send', () => {
  const config = () => ({
    page_access_token: 'ig-token',
    ig_account_id: '17841400000',
    app_secret: 's',
    verify_token: 'v',
    api_base_url: ig.url,
  });

  it('posts to {base}/{IG_ID}/messages as the Instagram API reference gives it', async () => {
    const out = await instagramSend.send(config(), { to: '5551', text: 'hi' }, ctx);
    expect(out.ok).toBe(true);
    expect(ig.server.requests[0].path).toBe('/17841400000/messages');
    expect(ig.server.requests[0].json).toEqual({ recipient: { id: '5551' }, messaging_type: 'RESPONSE', message: { text: 'hi' } });
  });

  it('maps the Instagram window subcode (2534022) to REPLY_WINDOW_CLOSED and keeps the 1000-character limit', async () => {
    ig.windowClosed.add('5552');
    expect(await instagramSend.send(config(), { to: '5552', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'REPLY_WINDOW_CLOSED' },
    });
    expect(instagramSend.maxTextLength).toBe(1000);
  });

  it('maps a network failure to PLATFORM_UNAVAILABLE', async () => {
    expect(await instagramSend.send({ ...config(), api_base_url: 'http://127.0.0.1:1' }, { to: '5551', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_UNAVAILABLE', retryable: true },
    });
  });
});

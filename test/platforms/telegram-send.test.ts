import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { telegramSend } from '../../src/platforms/telegram/send.js';
import { TelegramFake } from '../fakes/telegram.js';

let fake: TelegramFake;
const token = '123456:TEST-token_abc';
const ctx = { timeoutMs: 2000 };
const config = () => ({ bot_token: token, api_base_url: fake.url });
const send = (to: string, text: string, extra: Record<string, unknown> = {}) => telegramSend.send(config(), { to, text, ...extra }, ctx);

beforeAll(async () => {
  fake = await TelegramFake.start();
});
afterAll(() => fake.close());
beforeEach(() => fake.server.reset());

describe('Telegram send', () => {
  it('calls sendMessage with chat_id, text and parse_mode and answers the message id', async () => {
    const out = await send('42', 'hello *there*', { parseMode: 'MarkdownV2' });
    expect(out).toEqual({ ok: true, externalMessageId: '1' });
    const [r] = fake.server.requests;
    expect(r.method).toBe('POST');
    expect(r.path).toBe(`/bot${token}/sendMessage`);
    expect(r.json).toEqual({ chat_id: '42', text: 'hello *there*', parse_mode: 'MarkdownV2' });
  });

  it('maps 403 "bot was blocked by the user" to RECIPIENT_BLOCKED, not retried', async () => {
    fake.blockedChats.add('7');
    const out = await send('7', 'hi');
    expect(out).toMatchObject({
      ok: false,
      error: { code: 'RECIPIENT_BLOCKED', retryable: false, platformCode: 403, platformMessage: 'Forbidden: bot was blocked by the user' },
    });
  });

  it('maps 403 "bot can\'t initiate conversation" to RECIPIENT_NOT_STARTED', async () => {
    fake.notStartedChats.add('8');
    expect(await send('8', 'hi')).toMatchObject({ ok: false, error: { code: 'RECIPIENT_NOT_STARTED', retryable: false } });
  });

  it('maps 429 to PLATFORM_RATE_LIMITED with retry_after in ms', async () => {
    fake.server.script(1, {
      status: 429,
      body: { ok: false, error_code: 429, description: 'Too Many Requests: retry after 8', parameters: { retry_after: 8 } },
    });
    expect(await send('42', 'hi')).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_RATE_LIMITED', retryable: true, retryAfterMs: 8000 },
    });
  });

  it('maps 401 (bad token) to PLATFORM_AUTH_FAILED', async () => {
    fake.revokedTokens.add(token);
    try {
      expect(await send('42', 'hi')).toMatchObject({ ok: false, error: { code: 'PLATFORM_AUTH_FAILED', retryable: false } });
    } finally {
      fake.revokedTokens.clear();
    }
  });

  it('maps 400 chat not found to INVALID_RECIPIENT and other 400s to PLATFORM_REJECTED', async () => {
    fake.unknownChats.add('9');
    expect(await send('9', 'hi')).toMatchObject({ ok: false, error: { code: 'INVALID_RECIPIENT' } });
    expect(await send('42', 'bad', { parseMode: 'Bogus' })).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_REJECTED', platformCode: 400 },
    });
  });

  it('maps 5xx to PLATFORM_UNAVAILABLE (retryable) and a connection dropped after the call was read to DELIVERY_UNCERTAIN (not retried), without the token in the message', async () => {
    fake.server.script(1, { status: 502, body: 'Bad Gateway' }).script(1, { status: 500, destroy: true });
    const a = await send('42', 'hi');
    const b = await send('42', 'hi');
    expect(a).toMatchObject({ ok: false, error: { code: 'PLATFORM_UNAVAILABLE', retryable: true } });
    expect(b).toMatchObject({ ok: false, error: { code: 'DELIVERY_UNCERTAIN', retryable: false } });
    for (const out of [a, b]) expect(JSON.stringify(out)).not.toContain(token.split(':')[1]);
  });

  it('times out a platform that does not answer, as uncertain: it may have delivered', async () => {
    fake.server.script(1, { status: 200, body: { ok: true, result: { message_id: 1 } }, delayMs: 1500 });
    const out = await telegramSend.send(config(), { to: '42', text: 'hi' }, { timeoutMs: 300 });
    expect(out).toMatchObject({
      ok: false,
      error: { code: 'DELIVERY_UNCERTAIN', retryable: false, message: expect.stringContaining('timed out') },
    });
  });

  it('retries a platform that refuses the connection: nothing was sent', async () => {
    const out = await telegramSend.send({ ...config(), api_base_url: 'http://127.0.0.1:1' }, { to: '42', text: 'hi' }, { timeoutMs: 300 });
    expect(out).toMatchObject({ ok: false, error: { code: 'PLATFORM_UNAVAILABLE', retryable: true } });
  });

  it('sends a photo with the text as caption, a voice note with sendVoice, a PDF with sendDocument', async () => {
    const png = { filename: 'a.png', mimeType: 'image/png', data: Buffer.from('png-bytes') };
    const ogg = { filename: 'v.ogg', mimeType: 'audio/ogg', data: Buffer.from('ogg-bytes') };
    const pdf = { filename: 'd.pdf', mimeType: 'application/pdf', data: Buffer.from('pdf-bytes') };
    const out = await send('42', 'look', { files: [png, ogg, pdf] });
    expect(out.ok).toBe(true);
    expect(fake.server.requests.map((r) => r.path.split('/').pop())).toEqual(['sendPhoto', 'sendVoice', 'sendDocument']);
    const [photo, voice, doc] = fake.server.requests;
    expect(photo.form).toEqual({ chat_id: '42', caption: 'look' });
    expect(photo.files).toEqual([{ field: 'photo', filename: 'a.png', type: 'image/png', data: Buffer.from('png-bytes') }]);
    expect(voice.files?.[0]).toMatchObject({ field: 'voice', filename: 'v.ogg' });
    expect(voice.form?.caption).toBeUndefined();
    expect(doc.files?.[0]).toMatchObject({ field: 'document', filename: 'd.pdf' });
  });

  it('sends a text longer than a caption as its own message before the file', async () => {
    const text = 'x'.repeat(1500);
    await send('42', text, { files: [{ filename: 'a.png', mimeType: 'image/png', data: Buffer.from('p') }] });
    expect(fake.server.requests.map((r) => r.path.split('/').pop())).toEqual(['sendMessage', 'sendPhoto']);
    expect(fake.server.requests[1].form?.caption).toBeUndefined();
  });

  it('checks recipients (numeric chat ids, negative for groups) and the 4096 limit', () => {
    expect(telegramSend.checkRecipient('12345')).toBeUndefined();
    expect(telegramSend.checkRecipient('-100123')).toBeUndefined();
    expect(telegramSend.checkRecipient('@someone')).toMatch(/numeric/);
    expect(telegramSend.maxTextLength).toBe(4096);
  });

  it('validates config: bot_token shape, optional secret_token and api_base_url, unknown keys refused', () => {
    const s = telegramSend.configSchema;
    expect(s.safeParse({ bot_token: token }).success).toBe(true);
    expect(s.safeParse({ bot_token: 'nope' }).success).toBe(false);
    expect(s.safeParse({ bot_token: token, api_base_url: 'ftp://x' }).success).toBe(false);
    expect(s.safeParse({ bot_token: token, secret_token: 'has space' }).success).toBe(false);
    expect(s.safeParse({ bot_token: token, bot_tokn: 'typo' }).success).toBe(false);
    expect(telegramSend.secretFields).toEqual(['bot_token', 'secret_token']);
  });
});

import { describe, expect, it } from 'vitest';
import { emailInbound, emailSignature } from '../../../src/platforms/email/inbound.js';
import { smsInbound as sms, twilioSignature } from '../../../src/platforms/sms/inbound.js';
import { email, twilioInbound, twilioStatus } from '../../fakes/inbound/payloads.js';
import { inboundReq } from '../../fakes/inbound/request.js';
import { emailHeaders, form, twilioHeaders } from '../../fakes/inbound/signers.js';

describe('twilio signature', () => {
  it("matches Twilio's documented test vector", () => {
    // From Twilio's security documentation.
    const params = { CallSid: 'CA1234567890ABCDE', Caller: '+12349013030', Digits: '1234', From: '+12349013030', To: '+18005551212' };
    expect(twilioSignature('https://mycompany.com/myapp.php?foo=1&bar=2', Object.entries(params), '12345')).toBe(
      '0/KCTR6DLpKmkAf8muzZqo1nDgQ=',
    );
  });

  it('verifies over the public URL and the form params, whatever their order on the wire', () => {
    const config = { account_sid: 'AC1', auth_token: 'tok', from: '+15550001111' };
    const url = 'https://gw.example.com/webhooks/abc/def';
    const params = twilioInbound('SM1', '+16505551234', '+15550001111', 'hi');
    const shuffled = new URLSearchParams(Object.entries(params).reverse()).toString();
    expect(sms.verify(config, inboundReq(shuffled, twilioHeaders('tok', url, params), { publicUrl: url })).ok).toBe(true);
    expect(
      sms.verify(
        config,
        inboundReq(shuffled, twilioHeaders('tok', url, params), { publicUrl: 'https://other.example.com/webhooks/abc/def' }),
      ).ok,
    ).toBe(false);
    expect(
      sms.verify(config, inboundReq(form({ ...params, Body: 'changed' }), twilioHeaders('tok', url, params), { publicUrl: url })).ok,
    ).toBe(false);
    expect(sms.verify(config, inboundReq(form(params), {}, { publicUrl: url })).ok).toBe(false);
  });
});

describe('twilio normaliser, dedupe and acknowledgement', () => {
  const norm = (p: Record<string, string>) => sms.normalise({ ...inboundReq(form(p)), receivedAt: '2024-05-01T10:00:00.000Z' });

  it('reads an incoming SMS', () => {
    expect(norm(twilioInbound('SM1', '+16505551234', '+15550001111', 'hello'))).toEqual([
      {
        kind: 'message',
        externalMessageId: 'SM1',
        conversation: { externalId: '+16505551234' },
        sender: { externalId: '+16505551234' },
        recipient: { externalId: '+15550001111' },
        message: { text: 'hello', type: 'text' },
        occurredAt: '2024-05-01T10:00:00.000Z',
      },
    ]);
  });

  it('reads MMS media URLs and types', () => {
    const [r] = norm(
      twilioInbound('MM1', '+1', '+2', 'pic', [
        { url: 'https://api.twilio.com/Media/ME1', type: 'image/jpeg' },
        { url: 'https://api.twilio.com/Media/ME2', type: 'audio/amr' },
      ]),
    );
    expect(r).toMatchObject({
      message: {
        type: 'image',
        caption: 'pic',
        media: { url: 'https://api.twilio.com/Media/ME1', mimeType: 'image/jpeg' },
        extra: { more_media: [{ url: 'https://api.twilio.com/Media/ME2' }] },
      },
    });
  });

  it('reads status callbacks; undelivered is failed with its ErrorCode; queued is not reported', () => {
    expect(norm(twilioStatus('SM9', '+1', 'delivered'))).toEqual([
      expect.objectContaining({ kind: 'status', externalMessageId: 'SM9', status: 'delivered', recipient: { externalId: '+1' } }),
    ]);
    expect(norm(twilioStatus('SM9', '+1', 'undelivered', '30003'))[0]).toMatchObject({ status: 'failed', error: { code: '30003' } });
    expect(norm(twilioStatus('SM9', '+1', 'queued'))).toEqual([]);
  });

  it('keys on MessageSid, plus MessageStatus for callbacks', () => {
    expect(sms.dedupeKey(inboundReq(form(twilioInbound('SM1', '+1', '+2', 'x'))))).toBe('SM1');
    expect(sms.dedupeKey(inboundReq(form(twilioStatus('SM1', '+1', 'sent'))))).toBe('SM1.sent');
    expect(sms.dedupeKey(inboundReq(form({ Body: 'x' })))).toBeUndefined();
  });

  it('answers with empty TwiML', () => {
    expect(sms.acknowledge!(inboundReq(''))).toEqual({
      status: 200,
      contentType: 'text/xml',
      body: '<?xml version="1.0" encoding="UTF-8"?><Response/>',
    });
  });
});

describe('e-mail inbound (our own HMAC)', () => {
  const config = { smtp_url: 'smtp://x', from: 'support@example.com', inbound_secret: 'mail-secret-0123456789' };
  const body = JSON.stringify(email('abc@mail.example', 'eve@example.org', 'Where is my parcel?'));

  it('documents its signature: HMAC-SHA256 over "<timestamp>.<body>" as sha256=<hex>', () => {
    // A fixed vector (computed with `printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac secret`),
    // so a relay written elsewhere can check itself against it.
    expect(emailSignature('secret', '1700000000', '{"a":1}')).toBe(
      'sha256=49f24e537407743fa4a0242bb63b94b9a47ee99cbbe071ccd8a22550ae411686',
    );
  });

  it('accepts a signed request within 300 s and refuses others', () => {
    const now = Date.now();
    expect(emailInbound.verify(config, inboundReq(body, emailHeaders(config.inbound_secret, body), { now })).ok).toBe(true);
    expect(emailInbound.verify(config, inboundReq(body, emailHeaders('wrong-secret', body), { now })).ok).toBe(false);
    expect(
      emailInbound.verify(config, inboundReq(body, emailHeaders(config.inbound_secret, body, Math.floor(now / 1000) - 301), { now })).ok,
    ).toBe(false);
    expect(
      emailInbound.verify({ ...config, inbound_secret: undefined }, inboundReq(body, emailHeaders(config.inbound_secret, body), { now })),
    ).toEqual({ ok: false, reason: 'connection has no inbound_secret' });
  });

  it('normalises the documented JSON with threading ids in the message', () => {
    const mail = email('abc@mail.example', 'Eve@Example.org', 'Where is my parcel?', {
      in_reply_to: 'orig@gw',
      references: ['root@gw', 'orig@gw'],
    });
    const [r] = emailInbound.normalise(inboundReq(mail));
    expect(r).toMatchObject({
      kind: 'message',
      externalMessageId: '<abc@mail.example>',
      conversation: { externalId: 'eve@example.org', name: 'Eve Example' },
      sender: { externalId: 'eve@example.org' },
      recipient: { externalId: 'support@example.com' },
      message: {
        text: 'Where is my parcel?',
        type: 'text',
        extra: { subject: 'Order question', in_reply_to: '<orig@gw>', references: ['<root@gw>', '<orig@gw>'] },
      },
    });
  });

  it('carries inline attachments as media and falls back to the HTML text', () => {
    const mail = email('a2@x', 'e@x.org', undefined as unknown as string, {
      text: undefined,
      html: '<p>Hello <b>there</b></p>',
      attachments: [{ filename: 'v.ogg', content_type: 'audio/ogg', content_base64: 'T2dnUw==' }],
    });
    const [r] = emailInbound.normalise(inboundReq(mail));
    expect(r).toMatchObject({
      message: { text: 'Hello there', type: 'audio', media: { inlineBase64: 'T2dnUw==', filename: 'v.ogg', isAudio: true } },
    });
  });

  it('keys on the Message-ID and rejects bodies that are not the format', () => {
    expect(emailInbound.dedupeKey(inboundReq(body))).toBe('<abc@mail.example>');
    expect(emailInbound.dedupeKey(inboundReq({ from: 'x@y.z' }))).toBeUndefined();
    expect(() => emailInbound.normalise(inboundReq({ from: 'x@y.z' }))).toThrow();
  });
});

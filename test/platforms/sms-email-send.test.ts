import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import nodemailer from 'nodemailer';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { judgeUrl } from '../../src/net/outbound-policy.js';
import { emailSend, smtpError, smtpTransportOptions, subjectOf } from '../../src/platforms/email/send.js';
import { smsSend } from '../../src/platforms/sms/send.js';
import { SmtpFake } from '../fakes/email.js';
import { TwilioFake } from '../fakes/sms.js';

const ctx = { timeoutMs: 3000 };
const sid = `AC${'1'.repeat(32)}`;
let twilio: TwilioFake;
let smtp: SmtpFake;

beforeAll(async () => {
  twilio = await TwilioFake.start({ accountSid: sid, authToken: 'tw-token' });
  smtp = await SmtpFake.start({ users: { mailer: 'mail-pass' } });
});
afterAll(async () => {
  await Promise.all([twilio.close(), smtp.close()]);
});
beforeEach(() => {
  twilio.server.reset();
  smtp.received.length = 0;
});

describe('SMS (Twilio) send', () => {
  const config = () => ({ account_sid: sid, auth_token: 'tw-token', from: '+15005550006', api_base_url: twilio.url });

  it('creates a Message with basic auth and form fields, StatusCallback = the connection inbound URL, and answers the sid', async () => {
    const out = await smsSend.send(
      config(),
      { to: '+14155550100', text: 'hello' },
      { ...ctx, webhookUrl: 'https://gw.example/webhooks/abc/def' },
    );
    expect(out).toMatchObject({ ok: true, externalMessageId: expect.stringMatching(/^SM[0-9a-f]{32}$/) });
    const [r] = twilio.server.requests;
    expect(r.path).toBe(`/2010-04-01/Accounts/${sid}/Messages.json`);
    expect(r.headers.authorization).toBe(`Basic ${Buffer.from(`${sid}:tw-token`).toString('base64')}`);
    expect(r.form).toEqual({
      To: '+14155550100',
      Body: 'hello',
      From: '+15005550006',
      StatusCallback: 'https://gw.example/webhooks/abc/def',
    });
  });

  it('uses MessagingServiceSid instead of From when configured', async () => {
    const { from: _f, ...rest } = config();
    await smsSend.send({ ...rest, messaging_service_sid: `MG${'2'.repeat(32)}` }, { to: '+14155550100', text: 'x' }, ctx);
    expect(twilio.server.requests[0].form).toEqual({ To: '+14155550100', Body: 'x', MessagingServiceSid: `MG${'2'.repeat(32)}` });
  });

  it('maps 20003 to PLATFORM_AUTH_FAILED, 21211 to INVALID_RECIPIENT, 21610 to RECIPIENT_BLOCKED, 21617 to MESSAGE_TOO_LONG', async () => {
    twilio.invalidNumbers.add('+14155550101');
    twilio.optedOut.add('+14155550102');
    expect(await smsSend.send({ ...config(), auth_token: 'bad' }, { to: '+14155550100', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_AUTH_FAILED', platformCode: 20003 },
    });
    expect(await smsSend.send(config(), { to: '+14155550101', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'INVALID_RECIPIENT', platformCode: 21211 },
    });
    expect(await smsSend.send(config(), { to: '+14155550102', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'RECIPIENT_BLOCKED', platformCode: 21610 },
    });
    expect(await smsSend.send(config(), { to: '+14155550100', text: 'z'.repeat(1601) }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'MESSAGE_TOO_LONG', platformCode: 21617 },
    });
  });

  it('maps 429/20429 to PLATFORM_RATE_LIMITED and 5xx to PLATFORM_UNAVAILABLE', async () => {
    twilio.server.script(1, {
      status: 429,
      body: { code: 20429, message: 'Too Many Requests', status: 429 },
      headers: { 'retry-after': '3' },
    });
    expect(await smsSend.send(config(), { to: '+14155550100', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_RATE_LIMITED', retryAfterMs: 3000 },
    });
    twilio.server.script(1, { status: 503, body: { code: 20503, message: 'Service unavailable', status: 503 } });
    expect(await smsSend.send(config(), { to: '+14155550100', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_UNAVAILABLE', retryable: true },
    });
  });

  it('takes E.164 only, 1600 characters; config needs from or messaging_service_sid', () => {
    expect(smsSend.checkRecipient('+14155550100')).toBeUndefined();
    expect(smsSend.checkRecipient('14155550100')).toBeDefined();
    expect(smsSend.maxTextLength).toBe(1600);
    const r = smsSend.configSchema.safeParse({ account_sid: sid, auth_token: 't' });
    expect(r.success).toBe(false);
    expect(r.error!.issues[0].message).toMatch(/from or messaging_service_sid/);
  });
});

describe('E-mail send', () => {
  const config = () => ({ smtp_url: smtp.url('mailer', 'mail-pass'), from: 'Support <help@example.com>' });

  it('delivers over SMTP with auth: text body, subject from the first line, answers the Message-ID', async () => {
    const out = await emailSend.send(config(), { to: 'ann@example.org', text: 'Your order\nhas shipped.' }, ctx);
    expect(out).toMatchObject({ ok: true, externalMessageId: expect.stringMatching(/^<.+@.+>$/) });
    const [mail] = await smtp.waitFor(1);
    expect(mail.user).toBe('mailer');
    expect(mail.envelope).toEqual({ from: 'help@example.com', to: ['ann@example.org'] });
    expect(mail.parsed.subject).toBe('Your order');
    expect(mail.parsed.text?.trim()).toBe('Your order\nhas shipped.');
    expect(mail.parsed.messageId).toBe(out.ok ? out.externalMessageId : '');
  });

  it('uses a given subject, threads replies with In-Reply-To/References, and attaches files', async () => {
    await emailSend.send(
      config(),
      {
        to: 'ann@example.org',
        text: 'see attached',
        subject: 'Re: invoice',
        inReplyTo: '<inbound-1@mail.example.org>',
        files: [{ filename: 'inv.pdf', mimeType: 'application/pdf', data: Buffer.from('%PDF-1.4') }],
      },
      ctx,
    );
    const [mail] = await smtp.waitFor(1);
    expect(mail.parsed.subject).toBe('Re: invoice');
    expect(mail.parsed.inReplyTo).toBe('<inbound-1@mail.example.org>');
    expect(mail.parsed.references).toBe('<inbound-1@mail.example.org>');
    expect(mail.parsed.attachments.map((a) => [a.filename, a.contentType, a.content.toString()])).toEqual([
      ['inv.pdf', 'application/pdf', '%PDF-1.4'],
    ]);
  });

  it('maps a bad login to PLATFORM_AUTH_FAILED, an unknown mailbox to INVALID_RECIPIENT, 4xx to retryable, 5xx DATA to PLATFORM_REJECTED, no server to PLATFORM_UNAVAILABLE', async () => {
    expect(
      await emailSend.send({ ...config(), smtp_url: smtp.url('mailer', 'wrong') }, { to: 'a@example.org', text: 'x' }, ctx),
    ).toMatchObject({ ok: false, error: { code: 'PLATFORM_AUTH_FAILED' } });
    smtp.unknownMailboxes.add('ghost@example.org');
    expect(await emailSend.send(config(), { to: 'ghost@example.org', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'INVALID_RECIPIENT', platformCode: 550 },
    });
    smtp.script(1, { stage: 'rcpt', code: 451, message: '4.3.0 Temporary local problem' });
    expect(await emailSend.send(config(), { to: 'a@example.org', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_UNAVAILABLE', retryable: true, platformCode: 451 },
    });
    smtp.script(1, { stage: 'data', code: 450, message: '4.7.1 Too many messages, slow down' });
    expect(await emailSend.send(config(), { to: 'a@example.org', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_RATE_LIMITED', retryable: true },
    });
    smtp.script(1, { stage: 'data', code: 554, message: '5.7.1 Message rejected as spam' });
    expect(await emailSend.send(config(), { to: 'a@example.org', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_REJECTED', platformCode: 554, retryable: false },
    });
    const down = await emailSend.send({ ...config(), smtp_url: 'smtp://u:p@127.0.0.1:1' }, { to: 'a@example.org', text: 'x' }, ctx);
    expect(down).toMatchObject({ ok: false, error: { code: 'PLATFORM_UNAVAILABLE', retryable: true } });
    expect(JSON.stringify(down)).not.toContain('mail-pass');
  });

  it('api_base_url overrides the SMTP server and keeps the credentials of smtp_url', async () => {
    const out = await emailSend.send(
      { smtp_url: 'smtp://mailer:mail-pass@mail.invalid:2525', from: 'help@example.com', api_base_url: `smtp://127.0.0.1:${smtp.port}` },
      { to: 'b@example.org', text: 'hi' },
      ctx,
    );
    expect(out.ok).toBe(true);
    expect((await smtp.waitFor(1))[0].user).toBe('mailer');
  });

  it('derives subjects and checks addresses; smtp_url is sealed whole', () => {
    expect(subjectOf({ text: '\n\n  Hello there  \nmore' })).toBe('Hello there');
    expect(subjectOf({ text: 'x'.repeat(300) }).length).toBe(200);
    expect(subjectOf({ text: 'body', subject: 'Given' })).toBe('Given');
    expect(emailSend.checkRecipient('a.b+c@example.co.uk')).toBeUndefined();
    expect(emailSend.checkRecipient('Ann <a@example.org>')).toBeDefined();
    expect(emailSend.checkRecipient('no-at-sign')).toBeDefined();
    expect(emailSend.secretFields).toEqual(['smtp_url', 'inbound_secret']);
    expect(emailSend.configSchema.safeParse({ smtp_url: 'http://x', from: 'a@b.co' }).success).toBe(false);
    expect(emailSend.configSchema.safeParse({ smtp_url: 'smtps://u:p@smtp.example.com:465', from: 'Help <a@b.co>' }).success).toBe(true);
  });
});

describe('an SMTP server pinned to the address the policy checked', () => {
  /** A self-signed certificate for mail.test (and for nothing else: not for 127.0.0.1). */
  function certificate(): { key: string; cert: string } {
    const dir = mkdtempSync(join(tmpdir(), 'smtp-tls-'));
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=mail.test',
        '-addext',
        'subjectAltName=DNS:mail.test',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    return { key: readFileSync(join(dir, 'key.pem'), 'utf8'), cert: readFileSync(join(dir, 'cert.pem'), 'utf8') };
  }

  it('connects to the checked address and keeps the name for SNI and the certificate check', async () => {
    const { key, cert } = certificate();
    const names: string[] = [];
    const received: string[] = [];
    const server = new SMTPServer({
      secure: true,
      key,
      cert,
      logger: false,
      onAuth: (auth, _session, cb) => cb(null, { user: auth.username }),
      SNICallback: (name, cb) => {
        names.push(name);
        cb(null, undefined as never);
      },
      onData: (stream, session, cb) => {
        received.push(session.remoteAddress);
        stream.resume().on('end', () => cb());
      },
    });
    // The client that refuses the certificate drops the handshake: the server reports that, expectedly.
    server.on('error', () => {});
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.server.address() as { port: number }).port;
    try {
      const judged = judgeUrl(`smtps://u:p@Mail.Test:${port}`, 'smtp', 'public-https');
      if (!judged.ok) throw new Error(judged.reason);
      // As if mail.test had resolved to 127.0.0.1 and been judged: nodemailer resolves nothing itself.
      const options = smtpTransportOptions(judged.url, judged.host, '127.0.0.1', true);
      expect(options).toMatchObject({ host: '127.0.0.1', servername: 'mail.test', port, secure: true, auth: { user: 'u', pass: 'p' } });
      const transport = nodemailer.createTransport({ ...options, tls: { ca: cert }, connectionTimeout: 3000 });
      await transport.sendMail({ from: 'a@example.com', to: 'b@example.org', text: 'pinned' });
      transport.close();
      expect(names).toEqual(['mail.test']);
      expect(received).toEqual(['127.0.0.1']);
      // Without the name the certificate (made for mail.test) does not match the address.
      const unnamed = nodemailer.createTransport({ ...options, servername: undefined, tls: { ca: cert }, connectionTimeout: 3000 });
      await expect(unnamed.sendMail({ from: 'a@example.com', to: 'b@example.org', text: 'x' })).rejects.toThrow(
        /IP: 127\.0\.0\.1 is not in the cert/,
      );
      unnamed.close();
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('under the policy, an smtp:// server that offers no STARTTLS gets neither the login nor the message', async () => {
    const seen: string[] = [];
    const server = new SMTPServer({
      disabledCommands: ['STARTTLS'],
      allowInsecureAuth: true,
      logger: false,
      onAuth: (auth, _session, cb) => {
        seen.push(`AUTH ${auth.username}`);
        cb(null, { user: auth.username });
      },
      onData: (stream, _session, cb) => {
        seen.push('DATA');
        stream.resume().on('end', () => cb());
      },
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.server.address() as { port: number }).port;
    const send = (requireTls: boolean) => {
      const judged = judgeUrl(`smtp://u:p@127.0.0.1:${port}`, 'smtp', 'any');
      if (!judged.ok) throw new Error(judged.reason);
      const transport = nodemailer.createTransport({
        ...smtpTransportOptions(judged.url, judged.host, '127.0.0.1', requireTls),
        connectionTimeout: 3000,
      });
      return transport.sendMail({ from: 'a@example.com', to: 'b@example.org', text: 'secret' }).finally(() => transport.close());
    };
    try {
      await expect(send(true)).rejects.toThrow(/STARTTLS/);
      expect(seen).toEqual([]);
      // Outside the policy (development) the same server is used as it is.
      await send(false);
      expect(seen).toEqual(['AUTH u', 'DATA']);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

describe('an SMTP failure', () => {
  it('that went silent mid-session is DELIVERY_UNCERTAIN (the server may have queued it); one before the session is retried', () => {
    const timeout = (timeoutType: string) => Object.assign(new Error('Timeout'), { code: 'ETIMEDOUT', timeoutType });
    expect(smtpError(timeout('SOCKET_TIMEOUT'))).toMatchObject({ code: 'DELIVERY_UNCERTAIN', retryable: false });
    for (const t of ['CONNECT_TIMEOUT', 'GREETING_TIMEOUT', 'UPGRADE_TIMEOUT'])
      expect(smtpError(timeout(t)), t).toMatchObject({ code: 'PLATFORM_UNAVAILABLE', retryable: true });
    expect(smtpError(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }))).toMatchObject({ retryable: true });
  });
});

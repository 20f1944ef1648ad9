import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConnection } from '../../src/connections/connections.js';
import { isPublicAddress, judgeUrl, refusedUrl } from '../../src/net/outbound-policy.js';
import { emailSend } from '../../src/platforms/email/send.js';
import { downloadMedia } from '../../src/platforms/media.js';
import { telegramSend } from '../../src/platforms/telegram/send.js';
import { createWebhookHttpClient } from '../../src/webhooks/http-client.js';
import * as P from '../fakes/inbound/payloads.js';
import { metaHeaders } from '../fakes/inbound/signers.js';
import { connect, postWebhook, waitForEvent } from '../inbound/helpers.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { ADDRESS_FORMS, startListener, type Listener } from './ssrf-corpus.js';

/**
 * Every connection the workers make for a tenant goes through one outbound address policy
 * (OUTBOUND_ADDRESS_POLICY): under `public-https` a tenant cannot make us fetch the operator's
 * network — through a media URL, a redirect, a webhook target, a connection's api_base_url or
 * its SMTP server — and read the answer back. The address corpus is ./ssrf-corpus.ts; every
 * connection-config field gets it in ./ssrf-fields.test.ts.
 */

/** A loopback server standing for something internal: it records every request it gets. */
async function internal(): Promise<{ url: string; hits: string[]; server: Server }> {
  const hits: string[] = [];
  const server = createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'Content-Type': 'text/plain' }).end('internal secret: hunter2');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, hits, server };
}

describe('the address check', () => {
  it('refuses every non-public address form, IPv4 and IPv6', () => {
    for (const a of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '224.0.0.1',
      '::',
      '::1',
      '::127.0.0.1',
      '::7f00:1',
      '::a9fe:a9fe',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '64:ff9b::7f00:1',
      '2002:7f00:1::',
      'fe80::1',
      'fc00::1',
      'fd12:3456::1',
      'fd00:ec2::254',
      '::ffff:0:7f00:1',
      'ff02::1',
    ])
      expect(isPublicAddress(a), a).toBe(false);
    for (const a of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '::ffff:808:808'])
      expect(isPublicAddress(a), a).toBe(true);
  });

  it('judges every spelling of an address as the address connected to, in http(s) and smtp URLs alike', () => {
    for (const form of ADDRESS_FORMS.filter((f) => f.literal)) {
      expect(refusedUrl(new URL(`https://${form.host}/`), 'public-https'), form.what).toMatch(/not a public address/);
      const smtp = judgeUrl(`smtp://u:p@${form.host}:25`, 'smtp', 'public-https');
      expect(smtp.ok ? smtp.host : smtp.reason, `smtp ${form.host} (${form.what})`).toMatch(/not a public address/);
    }
    expect(judgeUrl('smtp://u:p@2130706433:25', 'smtp', 'any')).toMatchObject({ ok: true, host: '127.0.0.1' });
    expect(judgeUrl('smtp://u:p@Mail.Example.COM:25', 'smtp', 'public-https')).toMatchObject({ ok: true, host: 'mail.example.com' });
    expect(refusedUrl(new URL('https://example.com/'), 'public-https')).toBeUndefined();
    expect(refusedUrl(new URL('http://127.0.0.1/'), 'any')).toBeUndefined();
  });

  it("refuses an SMTP URL whose query would set the mail client's connection options", () => {
    for (const policy of ['any', 'public-https'] as const)
      expect(judgeUrl('smtp://u:p@smtp.example.com:587?proxy=http://127.0.0.1:3128', 'smtp', policy)).toEqual({
        ok: false,
        reason: 'must not carry query options',
      });
  });
});

describe('every corpus host at connect time, under the public policy', () => {
  let listener: Listener;
  beforeAll(async () => {
    listener = await startListener();
  });
  afterAll(() => listener.close());

  it('a webhook delivery is refused before connecting', async () => {
    const http = createWebhookHttpClient({ policy: 'public-https', timeoutMs: 2_000 });
    try {
      for (const form of ADDRESS_FORMS) {
        const r = await http.post(`https://${form.host}:${listener.port}/hook`, '{}', {});
        expect(r.statusCode, form.what).toBeUndefined();
        expect(r.error, form.what).toMatch(/^refused: /);
      }
    } finally {
      await http.close();
    }
    expect(listener.connections()).toBe(0);
  });

  it('a media download is refused before connecting', async () => {
    for (const form of ADDRESS_FORMS) {
      await expect(
        downloadMedia('MESSENGER', {}, { url: `https://${form.host}:${listener.port}/m.jpg` }, 'public-https'),
        form.what,
      ).rejects.toMatchObject({ code: 'ETARGETREFUSED' });
    }
    expect(listener.connections()).toBe(0);
  });

  it('an SMTP server whose name does not resolve gets no connection at all', async () => {
    const out = await emailSend.send(
      { smtp_url: `smtp://u:p@no-such-host.invalid:${listener.port}`, from: 'a@example.com' },
      { to: 'b@example.com', text: 'hi' },
      { timeoutMs: 2_000, guarded: true },
    );
    expect(out).toMatchObject({ ok: false, error: { code: 'PLATFORM_UNAVAILABLE', message: expect.stringMatching(/Could not resolve/) } });
    expect(listener.connections()).toBe(0);
  });
});

describe('media downloads', () => {
  let target: Awaited<ReturnType<typeof internal>>;
  let redirector: Server;
  let redirectUrl: string;
  beforeAll(async () => {
    target = await internal();
    redirector = createServer((_req, res) => res.writeHead(302, { Location: `${target.url}/redirected` }).end());
    await new Promise<void>((r) => redirector.listen(0, '127.0.0.1', r));
    redirectUrl = `http://127.0.0.1:${(redirector.address() as { port: number }).port}/media`;
  });
  afterAll(async () => {
    target.server.close();
    redirector.close();
  });

  it('refuses a loopback URL and a redirect to one under the public policy, without a request', async () => {
    await expect(downloadMedia('MESSENGER', {}, { url: `${target.url}/direct` }, 'public-https')).rejects.toMatchObject({
      code: 'ETARGETREFUSED',
    });
    await expect(downloadMedia('SMS', { account_sid: 'AC1', auth_token: 't' }, { url: redirectUrl }, 'public-https')).rejects.toMatchObject(
      { code: 'ETARGETREFUSED' },
    );
    expect(target.hits).toEqual([]);
  });

  it('follows a redirect under `any`, at most three hops', async () => {
    const got = await downloadMedia('SMS', { account_sid: 'AC1', auth_token: 't' }, { url: redirectUrl }, 'any');
    expect(got.data.toString()).toContain('internal secret');
    expect(target.hits).toEqual(['GET /redirected']);
  });
});

describe('end to end under the public policy', () => {
  let s: TestStack;
  let a: AppCredentials;
  let target: Awaited<ReturnType<typeof internal>>;
  let smtp: Listener;
  beforeAll(async () => {
    target = await internal();
    smtp = await startListener();
    s = await startTestStack({
      workers: ['inbound', 'ledger', 'send'],
      env: {
        OUTBOUND_ADDRESS_POLICY: 'public-https',
        WEBHOOK_TARGET_POLICY: '',
        // An operator's base for EMAIL covers nothing: an e-mail connection's smtp_url is always the tenant's.
        PLATFORM_API_BASES: 'EMAIL=https://smtp-relay.example.com',
        RATE_LIMIT_PER_MINUTE: '10000',
      },
    });
    a = await s.createApp();
  });
  afterAll(async () => {
    await s?.close();
    target?.server.close();
    await smtp?.close();
  });

  it('refuses every address literal as a webhook target when a subscription is created', async () => {
    for (const form of ADDRESS_FORMS.filter((f) => f.literal)) {
      const r = await s.request('POST', '/v1/webhook-subscriptions', {
        auth: a,
        body: { name: 's', target_url: `https://${form.host}:${new URL(target.url).port}/hook`, event_patterns: ['*'] },
      });
      expect(r.status, `${form.host} (${form.what}): ${r.text}`).toBe(400);
      expect(r.json.error).toMatchObject({ code: 'INVALID_WEBHOOK_TARGET', details: [{ path: ['target_url'] }] });
    }
    expect(target.hits).toEqual([]);
  });

  it('refuses an SMTP server at 127.0.0.1. when written, and never connects to one stored behind the API', async () => {
    const mail = (smtp_url: string, from: string) => ({ platform_name: 'EMAIL' as const, name: 'm', config: { smtp_url, from } });
    const written = await s.request('POST', '/v1/platform-connections', {
      auth: a,
      body: mail(`smtp://u:p@127.0.0.1.:${smtp.port}`, 'a@example.com'),
    });
    expect(written.status, written.text).toBe(400);
    expect(written.json.error).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ path: ['config', 'smtp_url'] }] });
    // Rows as an older release (or a direct write) left them: the send must judge them again.
    const stored = { ...s.deps, config: { ...s.deps.config, OUTBOUND_ADDRESS_POLICY: 'any' as const } };
    for (const [i, host] of ['127.0.0.1.', '127.1.', '2130706433', 'localhost'].entries()) {
      const conn = await createConnection(stored, a.appId, mail(`smtp://u:p@${host}:${smtp.port}`, `sender${i}@example.com`));
      expect(conn.ok).toBe(true);
      const r = await s.request('POST', '/v1/messages', {
        auth: a,
        body: { platform_connection_id: conn.ok && conn.value.id, to_external_id: 'ann@example.org', message: 'internal probe' },
      });
      expect(smtp.connections(), `${host} reached the listener`).toBe(0);
      expect(r.status, `${host}: ${r.text}`).toBe(422);
      expect(r.json.error, host).toMatchObject({ code: 'PLATFORM_REJECTED', message: expect.stringMatching(/outbound address policy/) });
    }
  });

  it('records a Messenger message whose attachment points inside without fetching it or serving its bytes', async () => {
    const fb = await connect(s, a, 'MESSENGER', { page_access_token: 't', page_id: '5290000001', app_secret: 'fb-s', verify_token: 'v' });
    const body = JSON.stringify(P.fbAttachment('page', '5290000001', 'PSID-S', 'm_ssrf', 'image', `${target.url}/latest/meta-data/`));
    expect((await postWebhook(s, fb.path, body, metaHeaders('fb-s', body))).status).toBe(200);
    const event = await waitForEvent(s, a.appId, 'message.inbound', (e) => e.payload.external_message_id === 'm_ssrf');
    expect(event.payload.message.media).toMatchObject({ id: null, url: null, error: expect.stringMatching(/outbound address policy/) });
    expect(JSON.stringify(event.payload)).not.toContain('hunter2');
    expect(target.hits).toEqual([]);
  });

  it('refuses an internal api_base_url when a connection is created or updated', async () => {
    for (const url of [target.url, 'https://127.0.0.1:8443', 'https://[::1]/', 'https://169.254.169.254/', 'https://2130706433/']) {
      const r = await s.request('POST', '/v1/platform-connections', {
        auth: a,
        body: { platform_name: 'TELEGRAM', name: 'x', config: { bot_token: '123:abc_DEF', api_base_url: url } },
      });
      expect(r.status, `${url}: ${r.text}`).toBe(400);
      expect(r.json.error).toMatchObject({
        code: 'VALIDATION_ERROR',
        details: [expect.objectContaining({ path: ['config', 'api_base_url'] })],
      });
    }
    const ok = await s.request('POST', '/v1/platform-connections', {
      auth: a,
      body: {
        platform_name: 'TELEGRAM',
        name: 'ok',
        config: { bot_token: '123:abc_DEF', api_base_url: 'https://telegram-proxy.example.com' },
      },
    });
    expect(ok.status, ok.text).toBe(201);
    const patch = await s.request('PATCH', `/v1/platform-connections/${ok.json.id}`, {
      auth: a,
      body: { config: { api_base_url: target.url } },
    });
    expect(patch.status, patch.text).toBe(400);
    const mail = await s.request('POST', '/v1/platform-connections', {
      auth: a,
      body: {
        platform_name: 'EMAIL',
        name: 'm',
        config: { smtp_url: 'smtp://u:p@127.0.0.1:25', from: 'a@example.com', inbound_secret: 'mail-secret-0123456789' },
      },
    });
    expect(mail.status, mail.text).toBe(400);
    expect(target.hits).toEqual([]);
  });

  it('never connects a guarded platform call to an internal host, and leaks nothing of its answer', async () => {
    // A name that resolves to loopback: only the connect-time check can catch it.
    const out = await telegramSend.send(
      { bot_token: '123:abc_DEF', api_base_url: `http://localhost:${new URL(target.url).port}` },
      { to: '42', text: 'hi' },
      { timeoutMs: 2_000, guarded: true },
    );
    expect(out).toMatchObject({
      ok: false,
      // Says why it was refused, not a guess at which field led there.
      error: {
        code: 'PLATFORM_REJECTED',
        retryable: false,
        message: expect.stringMatching(/outbound address policy: must use https/),
      },
    });
    expect(JSON.stringify(out)).not.toContain('hunter2');
    expect(target.hits).toEqual([]);
    // Unguarded (the operator's own PLATFORM_API_BASES), the same call goes out.
    const open = await telegramSend.send(
      { bot_token: '123:abc_DEF', api_base_url: target.url },
      { to: '42', text: 'hi' },
      { timeoutMs: 2_000 },
    );
    expect(open.ok).toBe(false);
    expect(target.hits.length).toBe(1);
  });
});

import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isPublicAddress, refusedUrl } from '../../src/net/outbound-policy.js';
import { downloadMedia } from '../../src/platforms/media.js';
import { telegramSend } from '../../src/platforms/telegram/send.js';
import * as P from '../fakes/inbound/payloads.js';
import { metaHeaders } from '../fakes/inbound/signers.js';
import { connect, postWebhook, waitForEvent } from '../inbound/helpers.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

/**
 * Every request the workers make for a tenant goes through one outbound address policy
 * (OUTBOUND_ADDRESS_POLICY): under `public-https` a tenant cannot make us fetch the operator's
 * network — through a media URL, a redirect, or a connection's api_base_url — and read the
 * answer back.
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
      'ff02::1',
    ])
      expect(isPublicAddress(a), a).toBe(false);
    for (const a of ['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '::ffff:8.8.8.8']) expect(isPublicAddress(a), a).toBe(true);
  });

  it('judges URL hosts in decimal, octal and hex the way they are connected to', () => {
    for (const u of [
      'http://2130706433/',
      'http://0177.0.0.1/',
      'http://0x7f.0.0.1/',
      'http://127.1/',
      'http://[::127.0.0.1]/',
      'http://[::ffff:169.254.169.254]/',
    ]) {
      expect(refusedUrl(new URL(u), 'public-https'), u).toBeDefined();
    }
    expect(refusedUrl(new URL('https://example.com/'), 'public-https')).toBeUndefined();
    expect(refusedUrl(new URL('http://127.0.0.1/'), 'any')).toBeUndefined();
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
  beforeAll(async () => {
    target = await internal();
    s = await startTestStack({
      workers: ['inbound', 'ledger'],
      env: { OUTBOUND_ADDRESS_POLICY: 'public-https', WEBHOOK_TARGET_POLICY: '' },
    });
    a = await s.createApp();
  });
  afterAll(async () => {
    await s?.close();
    target?.server.close();
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
      error: { code: 'PLATFORM_REJECTED', retryable: false, message: expect.stringMatching(/outbound address policy/) },
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

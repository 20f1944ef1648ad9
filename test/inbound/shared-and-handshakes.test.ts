import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fbEnvelope, waText } from '../fakes/inbound/payloads.js';
import { discordHeaders, discordKeys, metaHeaders, slackHeaders } from '../fakes/inbound/signers.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { connect, eventsOf, inboundJobCount, postWebhook, queuesIdle, waitForEvent, type CreatedConnection } from './helpers.js';

let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;
let waA: CreatedConnection;
let waB: CreatedConnection;
let fbA: CreatedConnection;
let fbB: CreatedConnection;

beforeAll(async () => {
  s = await startTestStack({ workers: ['inbound', 'ledger'] });
  a = await s.createApp();
  b = await s.createApp();
  // Two tenants on WhatsApp through two different Meta apps (different app secrets)…
  waA = await connect(s, a, 'WHATSAPP', {
    access_token: 't',
    phone_number_id: '1100000001',
    business_account_id: '1000000001',
    app_secret: 'secret-A',
    verify_token: 'verify-A',
  });
  waB = await connect(s, b, 'WHATSAPP', {
    access_token: 't',
    phone_number_id: '2200000002',
    business_account_id: '2000000002',
    app_secret: 'secret-B',
    verify_token: 'verify-B',
  });
  // …and on Messenger through one Meta app that serves both tenants' pages.
  fbA = await connect(s, a, 'MESSENGER', {
    page_access_token: 't',
    page_id: '3000000001',
    app_secret: 'shared-meta-secret',
    verify_token: 'fb-verify',
  });
  fbB = await connect(s, b, 'MESSENGER', {
    page_access_token: 't',
    page_id: '3000000002',
    app_secret: 'shared-meta-secret',
    verify_token: 'fb-verify',
  });
});
afterAll(() => s?.close());

const post = (c: CreatedConnection, body: string, headers: Record<string, string>) => postWebhook(s, c.path, body, headers);

describe('shared Meta-family webhook URLs', () => {
  it('gives every connection of a Meta platform the same URL', () => {
    expect(waA.webhookUrl).toBe(waB.webhookUrl);
    expect(fbA.webhookUrl).toBe(fbB.webhookUrl);
    expect(waA.webhookUrl).not.toBe(fbA.webhookUrl);
  });

  it("routes a payload to the connection it is addressed to, in that connection's application only", async () => {
    const body = JSON.stringify(waText('2000000002', '2200000002', '4915112345', 'wamid.route-b', 'for B'));
    expect((await post(waA, body, metaHeaders('secret-B', body))).status).toBe(200);
    const event = await waitForEvent(s, b.appId, 'message.inbound', (e) => e.payload.external_message_id === 'wamid.route-b');
    expect(event.payload.message.text).toBe('for B');
    await queuesIdle(s);
    expect((await eventsOf(s, a.appId)).filter((e) => e.payload.external_message_id === 'wamid.route-b')).toEqual([]);
  });

  it("splits one payload's entries between the applications whose pages they name", async () => {
    const body = JSON.stringify(
      fbEnvelope('page', '3000000001', [
        { sender: { id: 'U1' }, recipient: { id: '3000000001' }, timestamp: Date.now(), message: { mid: 'm_split_a', text: 'to A' } },
      ]),
    ).replace(
      /\]\}$/,
      `,${JSON.stringify({ id: '3000000002', time: Date.now(), messaging: [{ sender: { id: 'U2' }, recipient: { id: '3000000002' }, timestamp: Date.now(), message: { mid: 'm_split_b', text: 'to B' } }] })}]}`,
    );
    expect(JSON.parse(body).entry).toHaveLength(2);
    expect((await post(fbA, body, metaHeaders('shared-meta-secret', body))).status).toBe(200);
    await waitForEvent(s, a.appId, 'message.inbound', (e) => e.payload.external_message_id === 'm_split_a');
    await waitForEvent(s, b.appId, 'message.inbound', (e) => e.payload.external_message_id === 'm_split_b');
    await queuesIdle(s);
    expect((await eventsOf(s, a.appId, 'message.inbound')).map((e) => e.payload.external_message_id)).not.toContain('m_split_b');
    expect((await eventsOf(s, b.appId, 'message.inbound')).map((e) => e.payload.external_message_id)).not.toContain('m_split_a');
  });

  it("refuses a payload addressed to one tenant's number but signed with another tenant's app secret", async () => {
    await queuesIdle(s);
    const before = await inboundJobCount(s);
    const body = JSON.stringify(waText('2000000002', '2200000002', '4915112345', 'wamid.injected', 'injected'));
    const r = await post(waA, body, metaHeaders('secret-A', body));
    expect(r.status).toBe(401);
    expect(JSON.parse(r.text)).toEqual({ error: { code: 'UNAUTHORIZED', message: 'invalid signature' } });
    expect(await inboundJobCount(s)).toBe(before);
  });

  it('refuses a payload for an account no connection has', async () => {
    const body = JSON.stringify(waText('WABA-X', 'PN-X', '1', 'wamid.nobody', 'x'));
    const r = await post(waA, body, metaHeaders('secret-A', body));
    expect(r.status).toBe(401);
    expect(JSON.parse(r.text).error).toEqual({ code: 'UNAUTHORIZED', message: 'no connection for this payload' });
  });

  it('refuses the shared URL with a wrong secret', async () => {
    const body = JSON.stringify(waText('1000000001', '1100000001', '1', 'wamid.badurl', 'x'));
    expect(
      (
        await postWebhook(
          s,
          waA.path.replace(/.$/, (c) => (c === 'a' ? 'b' : 'a')),
          body,
          metaHeaders('secret-A', body),
        )
      ).status,
    ).toBe(401);
  });
});

describe('verification handshakes', () => {
  const hub = (token: string, challenge = 'ch-12345') =>
    `?hub.mode=subscribe&hub.verify_token=${encodeURIComponent(token)}&hub.challenge=${challenge}`;

  it('answers the hub challenge as text on the shared URL and on /webhooks/<platform> when a verify token matches', async () => {
    for (const path of [waA.path, '/webhooks/whatsapp']) {
      for (const token of ['verify-A', 'verify-B']) {
        const r = await postWebhook(s, path + hub(token), '', {}, 'GET');
        expect(r.status).toBe(200);
        expect(r.contentType).toMatch(/text\/plain/);
        expect(r.text).toBe('ch-12345');
      }
    }
    const fb = await postWebhook(s, `/webhooks/messenger${hub('fb-verify', '777')}`, '', {}, 'GET');
    expect([fb.status, fb.text]).toEqual([200, '777']);
  });

  it('answers 403 FORBIDDEN in the one error body, saying what is wrong, when the handshake cannot succeed', async () => {
    for (const [path, error] of [
      [`/webhooks/whatsapp${hub('fb-verify')}`, 'hub.verify_token does not match'],
      [waA.path + hub('wrong'), 'hub.verify_token does not match'],
      ['/webhooks/whatsapp?hub.mode=subscribe&hub.challenge=1', 'hub.verify_token is missing'],
      [`${waA.path}?hub.mode=subscribe&hub.challenge=1`, 'hub.verify_token is missing'],
      ['/webhooks/whatsapp?hub.mode=unsubscribe&hub.verify_token=verify-A&hub.challenge=1', 'hub.mode must be "subscribe"'],
      ['/webhooks/messenger?hub.mode=subscribe&hub.verify_token=fb-verify', 'hub.challenge is missing'],
    ]) {
      const r = await postWebhook(s, path, '', {}, 'GET');
      expect(r.status, path).toBe(403);
      expect(r.contentType, path).toMatch(/^application\/json/);
      expect(JSON.parse(r.text), path).toEqual({ error: { code: 'FORBIDDEN', message: error } });
    }
    expect((await postWebhook(s, `/webhooks/slack${hub('verify-A')}`, '', {}, 'GET')).status).toBe(404);
  });

  it('answers Slack url_verification with the challenge once the request is signed', async () => {
    const slack = await connect(s, a, 'SLACK', { bot_token: 'xoxb-1', signing_secret: 'slack-secret' });
    const body = JSON.stringify({
      token: 'Jhj5dZrVaK7ZwHHjRyZWjbDl',
      challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P',
      type: 'url_verification',
    });
    const r = await post(slack, body, slackHeaders('slack-secret', body));
    expect([r.status, r.text]).toEqual([200, '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P']);
    expect((await post(slack, body, slackHeaders('other', body))).status).toBe(401);
  });

  it('answers Discord PING with PONG, and a badly signed PING with 401 (Discord probes this)', async () => {
    const keys = discordKeys();
    const discord = await connect(s, a, 'DISCORD', { bot_token: 'b', application_id: '900000000000000001', public_key: keys.publicKeyHex });
    const body = JSON.stringify({ id: '1', application_id: '1', type: 1, token: 't', version: 1 });
    const r = await post(discord, body, discordHeaders(keys.privateKey, body));
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toEqual({ type: 1 });
    const bad = await post(discord, body, discordHeaders(discordKeys().privateKey, body));
    expect(bad.status).toBe(401);
  });
});

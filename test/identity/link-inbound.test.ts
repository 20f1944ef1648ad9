import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tgText, waText } from '../fakes/inbound/payloads.js';
import { metaHeaders, telegramHeaders } from '../fakes/inbound/signers.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { eventsOfType, eventually } from './fixtures.js';

/**
 * Linking end to end, the way a person does it: messages arrive as real platform webhooks
 * (Telegram update, signed WhatsApp Cloud API delivery) on the URLs the connections API hands
 * out, go through the inbound queue and worker, and the code in them links the accounts.
 */
let s: TestStack;
let app: AppCredentials;
let tgHook: string;
let waHook: string;
const TG_SECRET = 'tg-secret-token-1';
const WA_APP_SECRET = 'wa-app-secret-0123456789';
let update = 1000;
let wamid = 0;

beforeAll(async () => {
  s = await startTestStack({ workers: ['inbound', 'ledger'], env: { RATE_LIMIT_PER_MINUTE: '100000' } });
  app = await s.createApp();
  const tg = await s.request('POST', '/v1/platform-connections', {
    auth: app,
    body: {
      platform_name: 'TELEGRAM',
      name: 'Support bot',
      config: { bot_token: '123456:ABCdef', secret_token: TG_SECRET, bot_username: 'acme_support_bot' },
    },
  });
  expect(tg.status, tg.text).toBe(201);
  const wa = await s.request('POST', '/v1/platform-connections', {
    auth: app,
    body: {
      platform_name: 'WHATSAPP',
      name: 'Support number',
      config: {
        access_token: 'EAAG-token',
        phone_number_id: '1001',
        business_account_id: '2002',
        app_secret: WA_APP_SECRET,
        verify_token: 'vt',
        display_phone_number: '+1 555-000-1111',
      },
    },
  });
  expect(wa.status, wa.text).toBe(201);
  tgHook = new URL(tg.json.webhook_url).pathname;
  waHook = new URL(wa.json.webhook_url).pathname;
});
afterAll(() => s.close());

async function telegram(fromId: number, name: string, text: string) {
  const body = JSON.stringify(
    tgText(++update, update, text, {
      from: { id: fromId, is_bot: false, first_name: name },
      chat: { id: fromId, type: 'private', first_name: name },
    }),
  );
  const r = await s.request('POST', tgHook, { body, headers: telegramHeaders(TG_SECRET) });
  expect(r.status, r.text).toBe(200);
}
async function whatsapp(from: string, text: string) {
  const body = JSON.stringify(waText('2002', '1001', from, `wamid.${++wamid}`, text));
  const r = await s.request('POST', waHook, { body, headers: metaHeaders(WA_APP_SECRET, body) });
  expect(r.status, r.text).toBe(200);
}
/** The user of a platform account, once the inbound worker has recorded its message. */
async function userOf(
  platform: string,
  externalId: string,
): Promise<{ id: string; platform_users: { platform: string; external_id: string }[] }> {
  let found: { id: string; platform_users: { platform: string; external_id: string }[] } | undefined;
  await eventually(async () => {
    found = (await s.request('GET', `/v1/users?platform=${platform}&external_id=${externalId}`, { auth: app })).json.data[0];
    return found !== undefined;
  }, `${platform} user ${externalId}`);
  return found!;
}
async function inboundTexts(): Promise<string[]> {
  return (await eventsOfType(s, app.appId, 'message.inbound')).map((e) => (e.payload.message as { text: string }).text);
}

describe('link codes over real platform webhooks', () => {
  it('a code sent on WhatsApp links the sender to the user who started on Telegram', async () => {
    await telegram(501, 'Ann', 'hi, I need help');
    const ann = await userOf('telegram', '501');
    const code = await s.request('POST', '/v1/link-codes', { auth: app, body: { user_id: ann.id } });
    expect(code.status).toBe(201);
    expect(code.json.deep_links.map((l: { url: string }) => l.url)).toEqual([
      `https://t.me/acme_support_bot?start=${code.json.code}`,
      `https://wa.me/15550001111?text=${code.json.code}`,
    ]);

    await whatsapp('4915112345', code.json.code);
    await eventually(async () => (await eventsOfType(s, app.appId, 'link_code.activation')).length === 1, 'link_code.activation');
    const linked = (await s.request('GET', `/v1/users/${ann.id}`, { auth: app })).json;
    expect(linked.platform_users.map((p: { platform: string; external_id: string }) => `${p.platform}:${p.external_id}`).sort()).toEqual([
      'telegram:501',
      'whatsapp:4915112345',
    ]);
    // The message that carried the code is recorded as usual.
    await eventually(async () => (await inboundTexts()).includes(code.json.code), 'the code message recorded');
    const [merged] = await eventsOfType(s, app.appId, 'user.merged');
    expect(merged.payload).toMatchObject({ target_user_id: ann.id, link_code_id: code.json.id });
    // Later WhatsApp messages are Ann's.
    await whatsapp('4915112345', 'thanks!');
    await eventually(
      async () => (await s.request('GET', `/v1/users/${ann.id}/events?event_type=message.inbound`, { auth: app })).json.data.length === 3,
      "Ann's three messages",
    );
  });

  it('the Telegram deep link (/start <code>) links the Telegram account to the user who started on WhatsApp', async () => {
    await whatsapp('4917000002', 'hello');
    const bea = await userOf('whatsapp', '4917000002');
    const code = await s.request('POST', '/v1/link-codes', { auth: app, body: { user_id: bea.id } });
    await telegram(777, 'Bea', `/start ${code.json.code}`);
    await eventually(
      async () => (await eventsOfType(s, app.appId, 'link_code.activation')).some((e) => e.payload.link_code_id === code.json.id),
      'activation',
    );
    expect((await userOf('telegram', '777')).id).toBe(bea.id);

    // The used code, sent again by someone else, links nothing; their message is still recorded.
    await telegram(888, 'Eve', `/start ${code.json.code}`);
    const eve = await userOf('telegram', '888');
    expect(eve.id).not.toBe(bea.id);
    expect(eve.platform_users).toHaveLength(1);
    await eventually(
      async () => (await inboundTexts()).filter((t) => t === `/start ${code.json.code}`).length === 2,
      "Eve's message recorded",
    );
  });
});

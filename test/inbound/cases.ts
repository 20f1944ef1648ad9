import type { KeyObject } from 'node:crypto';
import * as P from '../fakes/inbound/payloads.js';
import {
  discordHeaders,
  discordKeys,
  emailHeaders,
  form,
  metaHeaders,
  slackHeaders,
  telegramHeaders,
  twilioHeaders,
} from '../fakes/inbound/signers.js';

export interface Delivery {
  body: string;
  headers: Record<string, string>;
}

/**
 * One platform as the end-to-end tests drive it: a connection config (issue 6 field names),
 * a signed text message in the platform's documented shape, and what the event must say.
 */
export interface PlatformCase {
  platform: 'TELEGRAM' | 'WHATSAPP' | 'MESSENGER' | 'INSTAGRAM' | 'SLACK' | 'DISCORD' | 'SMS' | 'EMAIL';
  config(apiBase: string): Record<string, unknown>;
  /** A signed text message numbered `n` (unique per n), posted at `webhookUrl`. */
  text(n: number, text: string, webhookUrl: string): Delivery;
  /** The same delivery signed with the wrong secret. */
  forged(n: number, text: string, webhookUrl: string): Delivery;
  externalId(n: number): string;
  sender: string;
  /** External id of the connection's system user (`sent_to`). */
  system: string;
  conversation: string;
  /** What an accepted delivery is answered with. */
  ack: { contentType: RegExp; body?: string };
}

const json = (o: unknown) => JSON.stringify(o);
const tgToken = '123456789:AAE-test-token';
const discord: { publicKeyHex: string; privateKey: KeyObject } = discordKeys();
const discordForger = discordKeys();

export const CASES: PlatformCase[] = [
  {
    platform: 'TELEGRAM',
    config: (api) => ({ bot_token: tgToken, secret_token: 'tg_secret-token_1', api_base_url: api }),
    text: (n, text) => ({ body: json(P.tgText(1000 + n, n, text)), headers: telegramHeaders('tg_secret-token_1') }),
    forged: (n, text) => ({ body: json(P.tgText(1000 + n, n, text)), headers: telegramHeaders('guessed') }),
    externalId: (n) => `${P.tgChat.id}:${n}`,
    sender: String(P.tgUser.id),
    system: '123456789',
    conversation: String(P.tgChat.id),
    ack: { contentType: /json/ },
  },
  {
    platform: 'WHATSAPP',
    config: (api) => ({
      access_token: 'wa-token',
      phone_number_id: '1065550001',
      business_account_id: '2065550001',
      app_secret: 'wa-app-secret',
      verify_token: 'wa-verify',
      api_base_url: api,
    }),
    text: (n, text) => {
      const body = json(P.waText('2065550001', '1065550001', '16505551234', `wamid.T${n}`, text));
      return { body, headers: metaHeaders('wa-app-secret', body) };
    },
    forged: (n, text) => {
      const body = json(P.waText('2065550001', '1065550001', '16505551234', `wamid.T${n}`, text));
      return { body, headers: metaHeaders('not-the-secret', body) };
    },
    externalId: (n) => `wamid.T${n}`,
    sender: '16505551234',
    system: '1065550001',
    conversation: '16505551234',
    ack: { contentType: /json/ },
  },
  {
    platform: 'MESSENGER',
    config: (api) => ({
      page_access_token: 'fb-token',
      page_id: '3065550001',
      app_secret: 'fb-app-secret',
      verify_token: 'fb-verify',
      api_base_url: api,
    }),
    text: (n, text) => {
      const body = json(P.fbText('page', '3065550001', 'PSID-1', `m_${n}`, text));
      return { body, headers: metaHeaders('fb-app-secret', body) };
    },
    forged: (n, text) => {
      const body = json(P.fbText('page', '3065550001', 'PSID-1', `m_${n}`, text));
      return { body, headers: metaHeaders('nope', body) };
    },
    externalId: (n) => `m_${n}`,
    sender: 'PSID-1',
    system: '3065550001',
    conversation: 'PSID-1',
    ack: { contentType: /json/ },
  },
  {
    platform: 'INSTAGRAM',
    config: (api) => ({
      page_access_token: 'ig-token',
      ig_account_id: '4065550001',
      app_secret: 'ig-app-secret',
      verify_token: 'ig-verify',
      api_base_url: api,
    }),
    text: (n, text) => {
      const body = json(P.fbText('instagram', '4065550001', 'IGSID-1', `ig_${n}`, text));
      return { body, headers: metaHeaders('ig-app-secret', body) };
    },
    forged: (n, text) => {
      const body = json(P.fbText('instagram', '4065550001', 'IGSID-1', `ig_${n}`, text));
      return { body, headers: metaHeaders('nope', body) };
    },
    externalId: (n) => `ig_${n}`,
    sender: 'IGSID-1',
    system: '4065550001',
    conversation: 'IGSID-1',
    ack: { contentType: /json/ },
  },
  {
    platform: 'SLACK',
    config: (api) => ({ bot_token: 'xoxb-test', signing_secret: 'slack-signing-secret', bot_user_id: 'UBOT', api_base_url: api }),
    text: (n, text) => {
      const body = json(P.slackMessage(`Ev${n}`, 'C100', 'U100', `1700000000.${String(n).padStart(6, '0')}`, text));
      return { body, headers: slackHeaders('slack-signing-secret', body) };
    },
    forged: (n, text) => {
      const body = json(P.slackMessage(`Ev${n}`, 'C100', 'U100', `1700000000.${String(n).padStart(6, '0')}`, text));
      return { body, headers: slackHeaders('guessed-secret', body) };
    },
    externalId: (n) => `C100:1700000000.${String(n).padStart(6, '0')}`,
    sender: 'U100',
    system: 'UBOT',
    conversation: 'C100',
    ack: { contentType: /json/ },
  },
  {
    platform: 'DISCORD',
    config: (api) => ({
      bot_token: 'discord-bot',
      application_id: '900000000000000001',
      public_key: discord.publicKeyHex,
      api_base_url: api,
    }),
    text: (n, text) => {
      const body = json(
        P.discordCommand(String(1175000000000000000n + BigInt(n)), 'CH-1', 'DU-1', 'say', [{ name: 'text', type: 3, value: text }]),
      );
      return { body, headers: discordHeaders(discord.privateKey, body) };
    },
    forged: (n, text) => {
      const body = json(
        P.discordCommand(String(1175000000000000000n + BigInt(n)), 'CH-1', 'DU-1', 'say', [{ name: 'text', type: 3, value: text }]),
      );
      return { body, headers: discordHeaders(discordForger.privateKey, body) };
    },
    externalId: (n) => String(1175000000000000000n + BigInt(n)),
    sender: 'DU-1',
    system: '900000000000000001',
    conversation: 'CH-1',
    ack: { contentType: /json/, body: '{"type":5}' },
  },
  {
    platform: 'SMS',
    config: (api) => ({
      account_sid: 'AC0123456789abcdef0123456789abcdef',
      auth_token: 'twilio-auth-token',
      from: '+15550001111',
      api_base_url: api,
    }),
    text: (n, text, url) => {
      const params = P.twilioInbound(`SM${n}`, '+16505551234', '+15550001111', text);
      return { body: form(params), headers: twilioHeaders('twilio-auth-token', url, params) };
    },
    forged: (n, text, url) => {
      const params = P.twilioInbound(`SM${n}`, '+16505551234', '+15550001111', text);
      return { body: form(params), headers: twilioHeaders('wrong-token', url, params) };
    },
    externalId: (n) => `SM${n}`,
    sender: '+16505551234',
    system: '+15550001111',
    conversation: '+16505551234',
    ack: { contentType: /xml/, body: '<?xml version="1.0" encoding="UTF-8"?><Response/>' },
  },
  {
    platform: 'EMAIL',
    config: () => ({ smtp_url: 'smtp://127.0.0.1:2525', from: 'support@example.com', inbound_secret: 'email-inbound-secret' }),
    text: (n, text) => {
      const body = json(P.email(`msg-${n}@mail.example`, 'eve@example.org', text));
      return { body, headers: emailHeaders('email-inbound-secret', body) };
    },
    forged: (n, text) => {
      const body = json(P.email(`msg-${n}@mail.example`, 'eve@example.org', text));
      return { body, headers: emailHeaders('guessed', body) };
    },
    externalId: (n) => `<msg-${n}@mail.example>`,
    sender: 'eve@example.org',
    system: 'support@example.com',
    conversation: 'eve@example.org',
    ack: { contentType: /json/ },
  },
];

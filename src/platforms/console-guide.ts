import type { DiscordConfig } from './discord/config.js';
import type { EmailConfig } from './email/config.js';
import type { InstagramConfig } from './instagram/config.js';
import type { MessengerConfig } from './messenger/config.js';
import type { SandboxConfig } from './sandbox/config.js';
import type { SlackConfig } from './slack/config.js';
import type { SmsConfig } from './sms/config.js';
import type { TelegramConfig } from './telegram/config.js';
import type { PlatformName } from './types.js';
import type { WhatsappConfig } from './whatsapp/config.js';

/**
 * What docs/platforms.md cannot read from the code: where each platform's console shows a
 * config value, how its inbound URL is registered, and what the platform reports. Keyed by the
 * config types, so a config key added without its line here does not compile (and
 * test/platforms/platform-docs.test.ts checks the keys at run time too).
 */
export interface PlatformGuide<C> {
  title: string;
  /** Where each config value comes from. */
  fields: { readonly [K in keyof Required<C>]: string };
  /** How the connection's `webhook_url` is given to the platform. */
  register: string;
  /** Statuses the platform reports for messages we sent (`failed` of a send that fails for good is every platform's). */
  statuses: readonly ('sent' | 'delivered' | 'read' | 'failed')[];
  /** Whether the platform reports reactions. */
  reactions: boolean;
  /** Whether the platform reports edits of a message (recorded as a further `message.inbound` with `edited: true`). */
  edits: boolean;
  /** What the platform delivers as `message.inbound`, when it is not plain messages. */
  inboundNote?: string;
}

const API_BASE_URL = 'Not from a console: overrides the API address (a proxy, or a local fake in tests). Leave it out.';
const META_APP_SECRET = 'Meta for Developers → your app → App settings → Basic → App secret (Show).';
const META_VERIFY_TOKEN = 'Any string you choose; type the same one as the Verify token when you register the callback URL.';
const GRAPH_VERSION = 'The Graph API version in the paths of the sample requests (e.g. `v21.0`); leave it out for the default.';

/** Each platform's config type: a platform missing here, or below, does not compile. */
interface Configs {
  TELEGRAM: TelegramConfig;
  WHATSAPP: WhatsappConfig;
  MESSENGER: MessengerConfig;
  INSTAGRAM: InstagramConfig;
  SLACK: SlackConfig;
  DISCORD: DiscordConfig;
  SMS: SmsConfig;
  EMAIL: EmailConfig;
  SANDBOX: SandboxConfig;
}

export const CONSOLE_GUIDE: { readonly [N in PlatformName]: PlatformGuide<Configs[N]> } = {
  TELEGRAM: {
    title: 'Telegram',
    fields: {
      bot_token: 'BotFather (`@BotFather` in Telegram): `/newbot` answers with it; `/mybots` → your bot → API Token shows it again.',
      secret_token:
        'Any 1-256 characters of `A-Za-z0-9_-` you choose; pass the same value as `secret_token` to `setWebhook`, and Telegram sends it with every update.',
      bot_username: 'The @username you gave BotFather (`/mybots` lists it); enables the `t.me/<bot>?start=<code>` link-code deep link.',
      api_base_url: API_BASE_URL,
    },
    register:
      'Call `https://api.telegram.org/bot<bot_token>/setWebhook` with `url=<webhook_url>` (and `secret_token=<secret_token>` when the connection has one): Telegram has no console for it.',
    statuses: [],
    reactions: true,
    edits: true,
  },
  WHATSAPP: {
    title: 'WhatsApp (Cloud API)',
    fields: {
      access_token:
        'Meta for Developers → your app → WhatsApp → API Setup (a temporary token), or Meta Business Settings → Users → System users → Generate new token with `whatsapp_business_messaging` (a lasting one).',
      phone_number_id: 'WhatsApp → API Setup → "Phone number ID", under the sending number.',
      business_account_id: 'WhatsApp → API Setup → "WhatsApp Business Account ID".',
      app_secret: META_APP_SECRET,
      verify_token: META_VERIFY_TOKEN,
      api_version: GRAPH_VERSION,
      display_phone_number: 'The sending number as WhatsApp → API Setup shows it; enables the `wa.me/<number>` link-code deep link.',
      api_base_url: API_BASE_URL,
    },
    register:
      'WhatsApp → Configuration → Webhook → Edit: Callback URL = `webhook_url`, Verify token = `verify_token`; then subscribe the `messages` field. Every WhatsApp connection of the service shares this URL.',
    statuses: ['sent', 'delivered', 'read', 'failed'],
    reactions: true,
    edits: false,
  },
  MESSENGER: {
    title: 'Messenger',
    fields: {
      page_access_token: 'Meta for Developers → your app → Messenger → Messenger API Settings → Access Tokens → Generate (for the page).',
      page_id: "The Page's ID: Messenger API Settings lists it beside the page (or the Page → About → Page transparency).",
      app_secret: META_APP_SECRET,
      verify_token: META_VERIFY_TOKEN,
      api_version: GRAPH_VERSION,
      api_base_url: API_BASE_URL,
    },
    register:
      "Messenger API Settings → Configure webhooks: Callback URL = `webhook_url`, Verify token = `verify_token`; then add the page's subscriptions `messages`, `message_deliveries`, `message_reads`, `message_reactions`, `message_edits`. Every Messenger connection shares this URL.",
    statuses: ['delivered', 'read'],
    reactions: true,
    edits: true,
  },
  INSTAGRAM: {
    title: 'Instagram (messaging)',
    fields: {
      page_access_token:
        'The access token of the Facebook Page linked to the Instagram professional account, with `instagram_manage_messages` (Messenger API Settings → Access Tokens).',
      ig_account_id:
        'The Instagram professional account id: your app → Instagram → API setup, or `GET /<page_id>?fields=instagram_business_account`.',
      page_id: "The linked Facebook Page's ID, when the account has one (Page → About → Page transparency).",
      app_secret: META_APP_SECRET,
      verify_token: META_VERIFY_TOKEN,
      api_base_url: API_BASE_URL,
    },
    register:
      'Your app → Instagram → Webhooks (the Instagram object): Callback URL = `webhook_url`, Verify token = `verify_token`; subscribe `messages`, `message_reactions`, `messaging_seen`. Every Instagram connection shares this URL.',
    statuses: ['delivered', 'read'],
    reactions: true,
    edits: true,
  },
  SLACK: {
    title: 'Slack',
    fields: {
      bot_token: 'api.slack.com/apps → your app → OAuth & Permissions → "Bot User OAuth Token" (`xoxb-…`), after installing the app.',
      signing_secret: 'api.slack.com/apps → your app → Basic Information → App Credentials → Signing Secret.',
      bot_user_id: "The bot's member id (`U…`): `auth.test`'s `user_id`, or the bot's profile → Copy member ID.",
      api_base_url: API_BASE_URL,
    },
    register:
      'api.slack.com/apps → your app → Event Subscriptions: Request URL = `webhook_url` (the service answers the `url_verification` challenge); subscribe the bot events `message.channels`, `message.im`, `reaction_added`, `reaction_removed`.',
    statuses: [],
    reactions: true,
    edits: true,
  },
  DISCORD: {
    title: 'Discord',
    fields: {
      bot_token: 'Developer Portal → Applications → your app → Bot → Reset Token (shown once).',
      application_id: 'Developer Portal → your app → General Information → Application ID.',
      public_key: 'Developer Portal → your app → General Information → Public Key.',
      api_base_url: API_BASE_URL,
    },
    register:
      'Developer Portal → your app → General Information → Interactions Endpoint URL = `webhook_url` (Discord checks it with a signed PING, which the service answers).',
    statuses: [],
    reactions: false,
    edits: false,
    inboundNote:
      'interactions only (slash commands, components, modals): ordinary channel messages need the Gateway websocket, which the service does not hold',
  },
  SMS: {
    title: 'SMS (Twilio)',
    fields: {
      account_sid: 'Twilio Console → Account Info (the console home) → Account SID (`AC…`).',
      auth_token: 'Twilio Console → Account Info → Auth Token (Show).',
      from: 'Twilio Console → Phone Numbers → Manage → Active numbers (E.164, `+1…`); give this or `messaging_service_sid`.',
      messaging_service_sid: "Twilio Console → Messaging → Services → the service's SID (`MG…`).",
      api_base_url: API_BASE_URL,
    },
    register:
      'Twilio Console → Phone Numbers → Active numbers → the number → Messaging configuration → "A message comes in": Webhook, `webhook_url`, HTTP POST (or the Messaging Service → Integration → incoming messages webhook). Status callbacks need nothing: each send names the same URL as its `StatusCallback`.',
    statuses: ['sent', 'delivered', 'read', 'failed'],
    reactions: false,
    edits: false,
  },
  EMAIL: {
    title: 'E-mail',
    fields: {
      smtp_url: "Your mail provider's SMTP settings page: `smtp://<user>:<password>@<host>:587` (or `smtps://…:465`).",
      from: 'A sender address your provider lets you send from (verified sender or domain), optionally `Name <address>`.',
      inbound_secret: 'Any string of 16+ characters you choose; the relay that posts inbound mail signs with it (docs/inbound.md).',
      api_base_url:
        'Not from a console: overrides the SMTP server of `smtp_url` (scheme, host, port), keeping its credentials. Leave it out.',
    },
    register:
      "Point your provider's inbound-parse webhook (through a small adapter) or your SMTP receiver at `webhook_url`, posting the JSON docs/inbound.md describes, signed with `inbound_secret`.",
    statuses: [],
    reactions: false,
    edits: false,
  },
  SANDBOX: {
    title: 'Sandbox',
    fields: {
      delivered_after_ms:
        'Not from a console (the sandbox has none): how long after a send the simulated `delivered` report comes, in ms (default 1000).',
      read_after_ms: 'How long after a send the simulated `read` report comes, in ms (default 3000).',
    },
    register:
      'Nothing to register, and no credentials: create the connection with `"config": {}`. Act as the end user with `POST /v1/platform-connections/{id}/sandbox/messages` (`{"from":"ada","text":"hi"}`; also `media`, `reply_to` and `reaction`): it goes through the same inbound queue and worker as a real platform\'s webhook. Sends are accepted at once; a text starting `/fail CODE` (such as `/fail RECIPIENT_BLOCKED`) is refused with that platform error.',
    statuses: ['delivered', 'read'],
    reactions: true,
    edits: false,
    inboundNote: 'what POST /v1/platform-connections/{id}/sandbox/messages posts as the end user (every chat is one to one)',
  },
};

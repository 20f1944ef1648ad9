import { API_BASE_ADDRESS, publicText } from '../config-fields.js';
import { configString } from '../inbound-common.js';
import type { PlatformAdapter } from '../types.js';
import { telegramInbound } from './inbound.js';
import { telegramMedia } from './media.js';
import { telegramSend } from './send.js';

export const telegram = {
  name: 'TELEGRAM',
  ...telegramSend,
  ...telegramInbound,
  addressFields: API_BASE_ADDRESS,
  rateBudget: { connection: { rate: 30, perMs: 1000, burst: 0 }, recipient: { rate: 1, perMs: 1000, burst: 0 } },
  // Groups and channels have negative ids; only private chats need the person to start the bot.
  replyPolicy: (chatId) => (chatId.startsWith('-') ? 'none' : 'user_must_start'),
  // A bot token is "<bot id>:<secret>": the id part is the bot's user id.
  systemExternalId: (config) => configString(config, 'bot_token')?.split(':')[0] ?? 'bot',
  // Inbound URLs are per connection, and a bot has one webhook: a second connection of the
  // same bot moves it rather than copies it, so there is nothing to claim.
  routingFields: [],
  downloadMedia: telegramMedia,
  deepLink: {
    url(config, code) {
      const bot = publicText(config, 'bot_username').replace(/^@/, '');
      return /^[A-Za-z][A-Za-z0-9_]{4,31}$/.test(bot) ? `https://t.me/${bot}?start=${code}` : undefined;
    },
    // What a t.me/<bot>?start=<code> link sends.
    codeIn: (text) => /^\/start(?:@[A-Za-z0-9_]+)?\s+(\S+)\s*$/.exec(text.trim())?.[1],
  },
} satisfies PlatformAdapter;

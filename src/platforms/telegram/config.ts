import { z } from 'zod';
import { apiBaseUrl, secret } from '../config-fields.js';

export const telegramConfig = z.strictObject({
  /** "<bot id>:<secret>" as BotFather hands it out. */
  bot_token: secret('bot_token').regex(/^\d+:[A-Za-z0-9_-]+$/, 'bot_token must look like 123456:ABC-DEF… (as BotFather gives it)'),
  /** The `secret_token` given to setWebhook; inbound updates must carry it in X-Telegram-Bot-Api-Secret-Token. */
  secret_token: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,256}$/, 'secret_token must be 1-256 characters of A-Z, a-z, 0-9, _ and -')
    .optional(),
  /** The bot's @username (public): lets link codes come with a t.me/<bot>?start=<code> deep link. */
  bot_username: z
    .string()
    .regex(/^@?[A-Za-z][A-Za-z0-9_]{4,31}$/, "bot_username must be the bot's Telegram username")
    .optional(),
  api_base_url: apiBaseUrl,
});
export type TelegramConfig = z.infer<typeof telegramConfig>;

export const TELEGRAM_SECRETS = ['bot_token', 'secret_token'] as const;

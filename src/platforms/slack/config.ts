import { z } from 'zod';
import { apiBaseUrl, secret } from '../config-fields.js';

export const slackConfig = z.strictObject({
  bot_token: secret('bot_token').regex(/^xoxb-/, 'bot_token must be a bot token (xoxb-…)'),
  signing_secret: secret('signing_secret'),
  /** The bot's own user id (U…), so its messages are recognised as the connection's. */
  bot_user_id: z
    .string()
    .regex(/^[UW][A-Z0-9]+$/, 'bot_user_id must be a Slack user id (U…)')
    .optional(),
  api_base_url: apiBaseUrl,
});
export type SlackConfig = z.infer<typeof slackConfig>;

export const SLACK_SECRETS = ['bot_token', 'signing_secret'] as const;

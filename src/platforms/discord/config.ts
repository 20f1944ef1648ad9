import { z } from 'zod';
import { apiBaseUrl, secret } from '../config-fields.js';

export const discordConfig = z.strictObject({
  bot_token: secret('bot_token'),
  application_id: z
    .string({ error: 'application_id is required' })
    .regex(/^\d{17,20}$/, 'application_id must be a Discord snowflake (17-20 digits)'),
  /** Hex Ed25519 public key of the application: verifies interactions. Public by nature, so not sealed. */
  public_key: z.string({ error: 'public_key is required' }).regex(/^[0-9a-fA-F]{64}$/, 'public_key must be 64 hex characters'),
  api_base_url: apiBaseUrl,
});
export type DiscordConfig = z.infer<typeof discordConfig>;

export const DISCORD_SECRETS = ['bot_token'] as const;

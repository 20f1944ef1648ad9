import { z } from 'zod';
import { apiBaseUrl, numericId, secret } from '../config-fields.js';

export const whatsappConfig = z.strictObject({
  access_token: secret('access_token'),
  phone_number_id: numericId('phone_number_id'),
  business_account_id: numericId('business_account_id'),
  /** Signs inbound webhooks (X-Hub-Signature-256). */
  app_secret: secret('app_secret'),
  /** Answers the hub.verify_token handshake. */
  verify_token: secret('verify_token'),
  /** Graph API version in the path. @default "v21.0" */
  api_version: z
    .string()
    .regex(/^v\d+\.\d+$/, 'api_version must look like v21.0')
    .optional(),
  /** The number's public phone number (public): lets link codes come with a wa.me/<number> deep link. */
  display_phone_number: z
    .string()
    .regex(/^\+?[\d ()-]{6,20}$/, 'display_phone_number must be a phone number')
    .optional(),
  api_base_url: apiBaseUrl,
});
export type WhatsappConfig = z.infer<typeof whatsappConfig>;

export const WHATSAPP_SECRETS = ['access_token', 'app_secret', 'verify_token'] as const;

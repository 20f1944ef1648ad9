import { z } from 'zod';
import { apiBaseUrl, numericId, secret } from '../config-fields.js';

export const messengerConfig = z.strictObject({
  page_access_token: secret('page_access_token'),
  page_id: numericId('page_id'),
  app_secret: secret('app_secret'),
  verify_token: secret('verify_token'),
  /** Graph API version in the path. @default "v21.0" */
  api_version: z
    .string()
    .regex(/^v\d+\.\d+$/, 'api_version must look like v21.0')
    .optional(),
  api_base_url: apiBaseUrl,
});
export type MessengerConfig = z.infer<typeof messengerConfig>;

export const MESSENGER_SECRETS = ['page_access_token', 'app_secret', 'verify_token'] as const;

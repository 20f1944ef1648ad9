import { z } from 'zod';
import { apiBaseUrl, numericId, secret } from '../config-fields.js';

export const instagramConfig = z.strictObject({
  page_access_token: secret('page_access_token'),
  ig_account_id: numericId('ig_account_id'),
  /** The Facebook page the Instagram account is linked to, when there is one (inbound routing). */
  page_id: numericId('page_id').optional(),
  app_secret: secret('app_secret'),
  verify_token: secret('verify_token'),
  api_base_url: apiBaseUrl,
});
export type InstagramConfig = z.infer<typeof instagramConfig>;

export const INSTAGRAM_SECRETS = ['page_access_token', 'app_secret', 'verify_token'] as const;

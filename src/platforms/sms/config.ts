import { z } from 'zod';
import { apiBaseUrl, secret } from '../config-fields.js';

export const smsConfig = z
  .strictObject({
    account_sid: z
      .string({ error: 'account_sid is required' })
      .regex(/^AC[0-9a-fA-F]{32}$/, 'account_sid must be AC followed by 32 hex characters'),
    auth_token: secret('auth_token'),
    /** The sending number (E.164)… */
    from: z
      .string()
      .regex(/^\+[1-9]\d{6,14}$/, 'from must be a phone number in E.164 form')
      .optional(),
    /** …or a Messaging Service that picks one. */
    messaging_service_sid: z
      .string()
      .regex(/^MG[0-9a-fA-F]{32}$/, 'messaging_service_sid must be MG followed by 32 hex characters')
      .optional(),
    api_base_url: apiBaseUrl,
  })
  .refine((c) => c.from !== undefined || c.messaging_service_sid !== undefined, {
    message: 'one of from or messaging_service_sid is required',
    path: ['from'],
  });
export type SmsConfig = z.infer<typeof smsConfig>;

export const SMS_SECRETS = ['auth_token'] as const;

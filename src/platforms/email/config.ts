import { z } from 'zod';
import { emailAddress } from '../recipients.js';

export const emailConfig = z.strictObject({
  /** smtp://user:pass@host:587 or smtps://…:465; sealed whole, since it carries the password. */
  smtp_url: z.url({ protocol: /^smtps?$/, error: 'smtp_url must be an smtp:// or smtps:// URL' }),
  /** Sender address, optionally with a display name: `Support <help@example.com>`. */
  from: z
    .string({ error: 'from is required' })
    .refine((f) => emailAddress(f.match(/<([^>]+)>\s*$/)?.[1] ?? f) === undefined, 'from must be an e-mail address, optionally as Name <address>'),
  /**
   * Overrides the SMTP server of smtp_url (scheme, host, port), keeping its credentials; the
   * same per-connection override every platform has.
   */
  api_base_url: z.url({ protocol: /^smtps?$/, error: 'api_base_url must be an smtp:// or smtps:// URL for EMAIL' }).optional(),
});
export type EmailConfig = z.infer<typeof emailConfig>;

export const EMAIL_SECRETS = ['smtp_url'] as const;

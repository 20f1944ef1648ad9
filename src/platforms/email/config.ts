import { z } from 'zod';
import { secret } from '../config-fields.js';

/** A plain addr-spec, without display name; strict enough that SMTP will not reject its syntax. */
export function emailAddress(to: string): string | undefined {
  return /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$/.test(
    to,
  ) && to.length <= 254
    ? undefined
    : `"${to}" is not an e-mail address`;
}

/** The address inside `Name <address>`, or the whole value when it has no angle brackets. */
export const mailboxOf = (from: string) => from.match(/<([^>]+)>\s*$/)?.[1] ?? from;

export const emailConfig = z.strictObject({
  /** smtp://user:pass@host:587 or smtps://…:465; sealed whole, since it carries the password. */
  smtp_url: z.url({ protocol: /^smtps?$/, error: 'smtp_url must be an smtp:// or smtps:// URL' }),
  /** Sender address, optionally with a display name: `Support <help@example.com>`. */
  from: z
    .string({ error: 'from is required' })
    .refine((f) => emailAddress(mailboxOf(f)) === undefined, 'from must be an e-mail address, optionally as Name <address>'),
  /**
   * Keys the HMAC that inbound e-mail relays sign their POSTs with (src/platforms/email/inbound.ts);
   * without it the connection refuses inbound mail.
   */
  inbound_secret: secret('inbound_secret').min(16, 'inbound_secret must be at least 16 characters').optional(),
  /**
   * Overrides the SMTP server of smtp_url (scheme, host, port), keeping its credentials; the
   * same per-connection override every platform has.
   */
  api_base_url: z.url({ protocol: /^smtps?$/, error: 'api_base_url must be an smtp:// or smtps:// URL for EMAIL' }).optional(),
});
export type EmailConfig = z.infer<typeof emailConfig>;

export const EMAIL_SECRETS = ['smtp_url', 'inbound_secret'] as const;

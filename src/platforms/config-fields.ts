import { z } from 'zod';

/** Every platform's API address can be overridden per connection (tests point it at local fakes). */
export const apiBaseUrl = z.url({ protocol: /^https?$/, error: 'api_base_url must be an http(s) URL' }).optional();

/** A credential: non-empty, no surrounding whitespace (a pasted newline is a common mistake). */
export const secret = (what: string) =>
  z
    .string({ error: `${what} is required` })
    .min(1, `${what} is required`)
    .max(4096)
    .refine((s) => s.trim() === s, `${what} must not have leading or trailing whitespace`);

/** A platform id (page id, phone number id…): digits. */
export const numericId = (what: string) => z.string({ error: `${what} is required` }).regex(/^\d{1,40}$/, `${what} must be digits`);

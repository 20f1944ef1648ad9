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

/** A public config field as deep links read it: trimmed, '' when absent or not text. */
export const publicText = (config: Record<string, unknown>, key: string): string =>
  typeof config[key] === 'string' ? (config[key] as string).trim() : '';

/** The outbound address policy judges every platform's `api_base_url` as an HTTP API base. */
export const API_BASE_ADDRESS = { api_base_url: 'http' } as const;

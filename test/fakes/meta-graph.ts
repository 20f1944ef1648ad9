import { randomBytes } from 'node:crypto';
import type { FakeReply, RecordedRequest } from './fake-server.js';

/** The Graph API error envelope (Meta's Graph API reference), as WhatsApp, Messenger and Instagram send it. */
export function graphError(status: number, code: number, message: string, extra: { subcode?: number; details?: string } = {}): FakeReply {
  return {
    status,
    body: {
      error: {
        message,
        type: 'OAuthException',
        code,
        ...(extra.subcode !== undefined ? { error_subcode: extra.subcode } : {}),
        ...(extra.details ? { error_data: { messaging_product: 'whatsapp', details: extra.details } } : {}),
        fbtrace_id: `A${randomBytes(8).toString('base64url')}`,
      },
    },
  };
}

export const invalidToken = (): FakeReply => graphError(401, 190, 'Invalid OAuth access token - Cannot parse access token');

/** The bearer token of a Graph call (header, or the `access_token` query parameter Graph also takes). */
export function bearerOf(r: RecordedRequest): string | undefined {
  const h = r.headers.authorization;
  if (h?.startsWith('Bearer ')) return h.slice(7);
  return r.query.access_token;
}

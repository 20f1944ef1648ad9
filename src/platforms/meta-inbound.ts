import { configString, header, hmacHex, isObject, ok, refuse, safeEqual } from './inbound-common.js';
import type { DirectAnswer, InboundRequest, VerifyOutcome } from './types.js';

/**
 * Meta family (WhatsApp, Messenger, Instagram): every POST carries
 * `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app_secret, raw body)>`.
 */
export function verifyHubSignature(config: Record<string, unknown>, req: InboundRequest): VerifyOutcome {
  const secret = configString(config, 'app_secret');
  if (!secret) return refuse('connection has no app_secret');
  const given = header(req, 'x-hub-signature-256');
  if (!given) return refuse('missing X-Hub-Signature-256');
  return safeEqual(given, `sha256=${hmacHex('sha256', secret, req.rawBody)}`) ? ok : refuse('invalid signature');
}

/**
 * `GET …?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…`: the challenge as text when
 * the token is this connection's verify_token, 403 otherwise. POSTs are not handshakes.
 */
export function hubChallenge(config: Record<string, unknown>, req: InboundRequest): DirectAnswer | undefined {
  if (req.method !== 'GET') return undefined;
  const expected = configString(config, 'verify_token');
  const { 'hub.mode': mode, 'hub.verify_token': token, 'hub.challenge': challenge } = req.query;
  if (mode === 'subscribe' && expected && token && challenge !== undefined && safeEqual(token, expected)) {
    return { status: 200, contentType: 'text/plain', body: challenge };
  }
  return { status: 403, contentType: 'text/plain', body: 'forbidden' };
}

/** `entry[].id` of a Meta payload: the page, Instagram account or WhatsApp business account. */
export function entryIds(body: unknown): string[] {
  if (!isObject(body) || !Array.isArray(body.entry)) return [];
  return body.entry.flatMap((e) => (isObject(e) && (typeof e.id === 'string' || typeof e.id === 'number') ? [String(e.id)] : []));
}

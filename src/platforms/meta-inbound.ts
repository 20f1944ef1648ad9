import { configString, header, hmacHex, isObject, ok, refuse, safeEqual } from './inbound-common.js';
import { AppError } from '../errors.js';
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

/** A refused handshake, answered with the one error body like every other refusal of the inbound paths. */
export const hubRefusal = (message: string): DirectAnswer => ({
  status: 403,
  contentType: 'application/json',
  body: JSON.stringify(new AppError('FORBIDDEN', message).toBody()),
});

/** Why a handshake's query cannot succeed whatever the token, or undefined when it is well formed. */
export function hubQueryProblem(query: Record<string, string>): string | undefined {
  if (query['hub.mode'] !== 'subscribe') return 'hub.mode must be "subscribe"';
  if (!query['hub.verify_token']) return 'hub.verify_token is missing';
  if (query['hub.challenge'] === undefined) return 'hub.challenge is missing';
  return undefined;
}

/**
 * `GET …?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…`: the challenge as text when
 * the token is this connection's verify_token, 403 otherwise. POSTs are not handshakes.
 */
export function hubChallenge(config: Record<string, unknown>, req: InboundRequest): DirectAnswer | undefined {
  if (req.method !== 'GET') return undefined;
  const problem = hubQueryProblem(req.query);
  if (problem) return hubRefusal(problem);
  const expected = configString(config, 'verify_token');
  if (!expected || !safeEqual(req.query['hub.verify_token'], expected)) return hubRefusal('hub.verify_token does not match');
  return { status: 200, contentType: 'text/plain', body: req.query['hub.challenge'] };
}

/** `entry[].id` of a Meta payload: the page, Instagram account or WhatsApp business account. */
export function entryIds(body: unknown): string[] {
  if (!isObject(body) || !Array.isArray(body.entry)) return [];
  return body.entry.flatMap((e) => (isObject(e) && (typeof e.id === 'string' || typeof e.id === 'number') ? [String(e.id)] : []));
}

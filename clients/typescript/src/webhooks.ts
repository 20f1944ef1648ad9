import { createHmac, timingSafeEqual } from 'node:crypto';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';

export { WebhookVerificationError };

/** The body of a webhook delivery (docs/webhook-receiver.md, The request). */
export interface WebhookDelivery {
  /** The delivery id; the same on every retry of it. */
  id: string;
  subscription_id: string;
  /** The event delivered: deduplicate by it, a delivery may repeat. */
  event_id: string;
  event_type: string;
  app_id: string;
  payload: Record<string, unknown>;
  /** Edges keyed by relation: one edge is an object, several an array. */
  edges: Record<string, WebhookEdge | WebhookEdge[]>;
  created_at: string;
  /** When this attempt was signed. */
  timestamp: string;
  platform_connection_id?: string;
}

export type WebhookEdge =
  | { platform_user_id: string; external_id: string | null; name?: string; is_system_user?: true }
  | { file_id: string };

/** Request headers as node:http gives them (lower-case names), or a fetch Headers. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

/** How far a signature's timestamp may be from now by default (the service's signing rule, and Standard Webhooks' own). */
const TOLERANCE_SECONDS = 300;

export interface VerifyWebhookOptions {
  /** The time to check the signature's timestamp against (default: the machine's clock). */
  now?: Date | number;
  /** How far, in seconds, the timestamp may be from `now` (default 300). */
  toleranceSeconds?: number;
}

/**
 * Checks that a delivery comes from the service and has not been altered or replayed late,
 * and returns its parsed body; throws WebhookVerificationError otherwise. Pass the raw body
 * exactly as received (a re-serialised JSON object would not match).
 *
 * The order is the body, then the headers, then the secrets: the order of the README's
 * dependency-free helper of the same name (which returns and throws the same way) and of the
 * Standard Webhooks libraries (`verify(payload, headers)`). Arguments given in another order
 * are refused with a TypeError naming the one that is wrong, not reported as a bad signature.
 *
 * A subscription whose secret has the `whsec_` form (every generated one) is signed the
 * Standard Webhooks way too (`webhook-id`, `webhook-timestamp`, `webhook-signature`), and is
 * verified with the `standardwebhooks` package. Any other secret is verified by the service's own rule:
 * `X-Service-Signature: sha256=<hex>`, HMAC-SHA256 keyed with the secret's text over
 * `<X-Service-Timestamp>.<body>`. During a rotation the service signs with the new and the
 * previous secret, and a receiver may pass both of its own (`[next, current]`): any one
 * signature matching any one secret is enough.
 */
export function verifyWebhook(
  body: string | Uint8Array,
  headers: WebhookHeaders,
  secrets: string | readonly string[],
  options: VerifyWebhookOptions = {},
): WebhookDelivery {
  const list = checkArguments(body, headers, secrets);
  const now = options.now === undefined ? new Date() : new Date(options.now);
  const tolerance = options.toleranceSeconds ?? TOLERANCE_SECONDS;
  const bytes = typeof body === 'string' ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  let failure: unknown;
  for (const secret of list) {
    try {
      return verifyWith(secret, bytes, headers, now, tolerance);
    } catch (err) {
      failure = err;
    }
  }
  throw failure;
}

const USAGE = 'verifyWebhook(rawBody, headers, secrets)';

const describe = (value: unknown) =>
  value === null || value === undefined
    ? String(value)
    : Array.isArray(value)
      ? 'an array'
      : value instanceof Uint8Array
        ? 'a Buffer'
        : typeof value === 'object'
          ? 'an object'
          : `a ${typeof value}`;

/** The three arguments, checked by type: swapped ones fail here with what was expected where. */
function checkArguments(body: unknown, headers: unknown, secrets: unknown): string[] {
  if (typeof body !== 'string' && !(body instanceof Uint8Array))
    throw new TypeError(`${USAGE}: rawBody must be the body as received (a string or Buffer), got ${describe(body)}`);
  if (headers === null || typeof headers !== 'object' || Array.isArray(headers) || headers instanceof Uint8Array)
    throw new TypeError(`${USAGE}: headers must be the request's headers (an object or Headers), got ${describe(headers)}`);
  const list: unknown[] = typeof secrets === 'string' ? [secrets] : Array.isArray(secrets) ? secrets : [secrets];
  if (list.length === 0 || list.some((s) => typeof s !== 'string' || s === ''))
    throw new TypeError(`${USAGE}: secrets must be the subscription's secret or an array of them, got ${describe(secrets)}`);
  return list as string[];
}

function verifyWith(secret: string, body: string | Buffer, headers: WebhookHeaders, now: Date, tolerance: number): WebhookDelivery {
  const header = (name: string) => readHeader(headers, name);
  const text = typeof body === 'string' ? body : body.toString('utf8');
  const standard = { id: header('webhook-id'), timestamp: header('webhook-timestamp'), signature: header('webhook-signature') };
  if (secret.startsWith('whsec_') && standard.id && standard.timestamp && standard.signature) {
    checkTimestamp(standard.timestamp, now, tolerance);
    return new Webhook(secret).verify(text, {
      'webhook-id': standard.id,
      'webhook-timestamp': standard.timestamp,
      'webhook-signature': standard.signature,
    }) as WebhookDelivery;
  }
  const timestamp = header('x-service-timestamp');
  const signatures = header('x-service-signature');
  if (!timestamp || !signatures) throw new WebhookVerificationError('Missing X-Service-Signature or X-Service-Timestamp');
  checkTimestamp(timestamp, now, tolerance);
  const expected = Buffer.from(`sha256=${createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex')}`);
  const match = signatures.split(' ').some((s) => {
    const given = Buffer.from(s);
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!match) throw new WebhookVerificationError('No matching signature found');
  return JSON.parse(text) as WebhookDelivery;
}

/**
 * The tolerance is checked here as well as by `standardwebhooks` (which reads the machine's
 * clock), so `now` decides for both schemes.
 */
function checkTimestamp(value: string, now: Date, tolerance: number): void {
  const seconds = Number(value);
  if (!/^\d+$/.test(value) || Math.abs(now.getTime() / 1000 - seconds) > tolerance)
    throw new WebhookVerificationError('Message timestamp too old or too new');
}

function readHeader(headers: WebhookHeaders, name: string): string | undefined {
  if (headers instanceof Headers) return headers.get(name) ?? undefined;
  const value = headers[name] ?? Object.entries(headers).find(([k]) => k.toLowerCase() === name)?.[1];
  return Array.isArray(value) ? value.join(' ') : value;
}

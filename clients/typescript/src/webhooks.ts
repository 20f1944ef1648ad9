import { createHmac, timingSafeEqual } from 'node:crypto';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';

export { WebhookVerificationError };

/** The body of a webhook delivery (SPEC 6.3). */
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

/** How far a signature's timestamp may be from now (SPEC 5.2, and Standard Webhooks' own). */
const TOLERANCE_SECONDS = 300;

/**
 * Checks that a delivery comes from the service and has not been altered or replayed late,
 * and returns its parsed body; throws WebhookVerificationError otherwise. Pass the raw body
 * exactly as received (a re-serialised JSON object would not match).
 *
 * A subscription whose secret has the `whsec_` form (every generated one) is signed the
 * Standard Webhooks way too (`webhook-id`, `webhook-timestamp`, `webhook-signature`), and is
 * verified with the `standardwebhooks` package. Any other secret is verified by SPEC 5.2:
 * `X-Service-Signature: sha256=<hex>`, HMAC-SHA256 keyed with the secret's text over
 * `<X-Service-Timestamp>.<body>`. During a rotation the service signs with the new and the
 * previous secret, and a receiver may pass both of its own (`[next, current]`): any one
 * signature matching any one secret is enough.
 */
export function verifyWebhook(
  secrets: string | string[],
  body: string | Buffer,
  headers: WebhookHeaders,
  now: Date = new Date(),
): WebhookDelivery {
  const list = typeof secrets === 'string' ? [secrets] : secrets;
  if (list.length === 0) throw new WebhookVerificationError('No secret to verify with');
  let failure: unknown;
  for (const secret of list) {
    try {
      return verifyWith(secret, body, headers, now);
    } catch (err) {
      failure = err;
    }
  }
  throw failure;
}

function verifyWith(secret: string, body: string | Buffer, headers: WebhookHeaders, now: Date): WebhookDelivery {
  const header = (name: string) => readHeader(headers, name);
  const text = typeof body === 'string' ? body : body.toString('utf8');
  const standard = { id: header('webhook-id'), timestamp: header('webhook-timestamp'), signature: header('webhook-signature') };
  if (secret.startsWith('whsec_') && standard.id && standard.timestamp && standard.signature) {
    checkTimestamp(standard.timestamp, now);
    return new Webhook(secret).verify(text, {
      'webhook-id': standard.id,
      'webhook-timestamp': standard.timestamp,
      'webhook-signature': standard.signature,
    }) as WebhookDelivery;
  }
  const timestamp = header('x-service-timestamp');
  const signatures = header('x-service-signature');
  if (!timestamp || !signatures) throw new WebhookVerificationError('Missing X-Service-Signature or X-Service-Timestamp');
  checkTimestamp(timestamp, now);
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
function checkTimestamp(value: string, now: Date): void {
  const seconds = Number(value);
  if (!/^\d+$/.test(value) || Math.abs(now.getTime() / 1000 - seconds) > TOLERANCE_SECONDS)
    throw new WebhookVerificationError('Message timestamp too old or too new');
}

function readHeader(headers: WebhookHeaders, name: string): string | undefined {
  if (headers instanceof Headers) return headers.get(name) ?? undefined;
  const value = headers[name] ?? Object.entries(headers).find(([k]) => k.toLowerCase() === name)?.[1];
  return Array.isArray(value) ? value.join(' ') : value;
}

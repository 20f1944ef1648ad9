import { createHmac, randomBytes } from 'node:crypto';

/** Standard Webhooks secret form: `whsec_` + base64 of the key bytes. */
const STANDARD_SECRET_RE = /^whsec_([A-Za-z0-9+/]{22,}={0,2})$/;

/** A new secret: 32 random bytes in the Standard Webhooks form (50 characters). */
export function generateSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** The key bytes Standard Webhooks signs with, or undefined when the secret is not of that form. */
export function standardKey(secret: string): Buffer | undefined {
  const m = STANDARD_SECRET_RE.exec(secret);
  return m ? Buffer.from(m[1], 'base64') : undefined;
}

/** `sha256=<hex>` over `<timestamp>.<body>`, keyed with the secret's UTF-8 text (SPEC 5.2). */
export function serviceSignature(secret: string, timestamp: number, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex')}`;
}

/** `v1,<base64>` over `<id>.<timestamp>.<body>`, keyed with the decoded `whsec_` bytes. */
export function standardSignature(key: Buffer, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest('base64')}`;
}

export interface SignInput {
  deliveryId: string;
  /** Unix seconds of this attempt. */
  timestamp: number;
  body: string;
  /** Current secret first; during a rotation window the previous one follows. */
  secrets: string[];
}

/**
 * The signature headers of one attempt. Every secret in the list signs, space-separated, so
 * a receiver that still holds the previous secret keeps verifying during a rotation. The
 * Standard Webhooks headers are added when the current secret has the `whsec_` form.
 */
export function signatureHeaders(input: SignInput): Record<string, string> {
  const { deliveryId, timestamp, body, secrets } = input;
  const headers: Record<string, string> = {
    'x-service-signature': secrets.map((s) => serviceSignature(s, timestamp, body)).join(' '),
    'x-service-timestamp': String(timestamp),
    'x-service-delivery-id': deliveryId,
  };
  if (secrets[0] !== undefined && standardKey(secrets[0])) {
    const keys = secrets.map(standardKey).filter((k): k is Buffer => k !== undefined);
    headers['webhook-id'] = deliveryId;
    headers['webhook-timestamp'] = String(timestamp);
    headers['webhook-signature'] = keys.map((k) => standardSignature(k, deliveryId, timestamp, body)).join(' ');
  }
  return headers;
}

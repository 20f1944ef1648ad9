import { createHmac, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';

/** Standard Webhooks secret form: `whsec_` + base64 of the key bytes. */
const STANDARD_SECRET_RE = /^whsec_([A-Za-z0-9+/]{22,}={0,2})$/;

/** A new secret: 32 random bytes in the Standard Webhooks form (50 characters). */
export function generateSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** The key bytes Standard Webhooks signs with, or undefined when the secret is not of that form. */
function standardKey(secret: string): Buffer | undefined {
  const m = STANDARD_SECRET_RE.exec(secret);
  return m ? Buffer.from(m[1], 'base64') : undefined;
}

/** `sha256=<hex>` over `<timestamp>.<body>`, keyed with the secret's UTF-8 text (docs/webhook-receiver.md). */
function serviceSignature(secret: string | KeyObject, timestamp: number, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex')}`;
}

/** `v1,<base64>` over `<id>.<timestamp>.<body>`, keyed with the decoded `whsec_` bytes. */
function standardSignature(key: Buffer | KeyObject, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest('base64')}`;
}

export interface SignInput {
  deliveryId: string;
  /** Unix seconds of this attempt. */
  timestamp: number;
  body: string;
}

/** Signs attempts with a fixed list of secrets; see createSigner. */
export type Signer = (input: SignInput) => Record<string, string>;

/**
 * A signer for a list of secrets, current first (during a rotation window the previous one
 * follows). Every secret signs, space-separated, so a receiver that still holds the previous
 * secret keeps verifying during a rotation; the Standard Webhooks headers are added when the
 * current secret has the `whsec_` form. The keys are prepared once, so each attempt costs one
 * HMAC per secret and header kind and nothing else.
 */
export function createSigner(secrets: string[]): Signer {
  const serviceKeys = secrets.map((s) => createSecretKey(Buffer.from(s, 'utf8')));
  const standardKeys =
    secrets[0] !== undefined && standardKey(secrets[0])
      ? secrets
          .map(standardKey)
          .filter((k): k is Buffer => k !== undefined)
          .map((k) => createSecretKey(k))
      : [];
  return ({ deliveryId, timestamp, body }) => {
    const headers: Record<string, string> = {
      'x-service-signature':
        serviceKeys.length === 1
          ? serviceSignature(serviceKeys[0], timestamp, body)
          : serviceKeys.map((k) => serviceSignature(k, timestamp, body)).join(' '),
      'x-service-timestamp': String(timestamp),
      'x-service-delivery-id': deliveryId,
    };
    if (standardKeys.length) {
      headers['webhook-id'] = deliveryId;
      headers['webhook-timestamp'] = headers['x-service-timestamp'];
      headers['webhook-signature'] = standardKeys.map((k) => standardSignature(k, deliveryId, timestamp, body)).join(' ');
    }
    return headers;
  };
}

/** The signature headers of one attempt (a one-off signer: test sends). */
export function signatureHeaders(input: SignInput & { secrets: string[] }): Record<string, string> {
  return createSigner(input.secrets)(input);
}

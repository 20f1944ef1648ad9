import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Encrypts stored platform credentials and webhook secrets with AES-256-GCM. The key is
 * derived from SECRETS_KEY with HKDF so any string of 32+ characters works. Stored form:
 * `v1:<iv>:<tag>:<ciphertext>`, base64url parts; the version allows a later key rotation.
 */
export interface SecretBox {
  seal(plain: string): string;
  open(sealed: string): string;
  /**
   * A keyed hash (HMAC-SHA256, hex) of a secret, to find a row by a secret a caller presents
   * without storing the secret or a hash anyone could compute from a guess.
   */
  fingerprint(plain: string): string;
}

export function createSecretBox(secretsKey: string): SecretBox {
  const key = Buffer.from(hkdfSync('sha256', secretsKey, 'messaging-gateway', 'secret-box-v1', 32));
  // A key of its own: the lookup hash must not be usable as (or reveal anything about) the cipher key.
  const lookupKey = Buffer.from(hkdfSync('sha256', secretsKey, 'messaging-gateway', 'lookup-hash-v1', 32));
  return {
    fingerprint: (plain) => createHmac('sha256', lookupKey).update(plain).digest('hex'),
    seal(plain) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), body.toString('base64url')].join(':');
    },
    open(sealed) {
      const [v, iv, tag, body] = sealed.split(':');
      if (v !== 'v1' || !iv || !tag || body === undefined) throw new Error('not a sealed secret');
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
    },
  };
}

import { createHmac, generateKeyPairSync, sign as edSign, type KeyObject } from 'node:crypto';

/**
 * How each platform signs its webhook requests (as each documents it), written independently of the
 * code under test so the tests check the scheme, not our implementation against itself.
 */

/** Meta family: X-Hub-Signature-256. */
export function metaHeaders(appSecret: string, body: string): Record<string, string> {
  return {
    'Content-Type': 'application/json',
    'X-Hub-Signature-256': `sha256=${createHmac('sha256', appSecret).update(body).digest('hex')}`,
  };
}

/** Slack v0 signature over `v0:{ts}:{body}`. */
export function slackHeaders(signingSecret: string, body: string, ts = Math.floor(Date.now() / 1000)): Record<string, string> {
  const sig = `v0=${createHmac('sha256', signingSecret).update(`v0:${ts}:${body}`).digest('hex')}`;
  return { 'Content-Type': 'application/json', 'X-Slack-Request-Timestamp': String(ts), 'X-Slack-Signature': sig };
}

/** A Discord application's key pair: the public key as the 64-hex-digit form Discord shows. */
export function discordKeys(): { publicKeyHex: string; privateKey: KeyObject } {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const der = publicKey.export({ format: 'der', type: 'spki' });
  return { publicKeyHex: der.subarray(der.length - 32).toString('hex'), privateKey };
}

export function discordHeaders(privateKey: KeyObject, body: string, ts = String(Math.floor(Date.now() / 1000))): Record<string, string> {
  const sig = edSign(null, Buffer.from(ts + body), privateKey).toString('hex');
  return { 'Content-Type': 'application/json', 'X-Signature-Ed25519': sig, 'X-Signature-Timestamp': ts };
}

/** Twilio: base64 HMAC-SHA1 of URL + params sorted by name as name+value. */
export function twilioHeaders(authToken: string, url: string, params: Record<string, string>): Record<string, string> {
  const data =
    url +
    Object.keys(params)
      .sort()
      .map((k) => k + params[k])
      .join('');
  return {
    'Content-Type': 'application/x-www-form-urlencoded',
    'X-Twilio-Signature': createHmac('sha1', authToken).update(data).digest('base64'),
  };
}

export const form = (params: Record<string, string>) => new URLSearchParams(params).toString();

export function telegramHeaders(secretToken?: string): Record<string, string> {
  return { 'Content-Type': 'application/json', ...(secretToken ? { 'X-Telegram-Bot-Api-Secret-Token': secretToken } : {}) };
}

/** Our documented e-mail inbound scheme: HMAC-SHA256 over `<timestamp>.<body>`. */
export function emailHeaders(secret: string, body: string, ts = Math.floor(Date.now() / 1000)): Record<string, string> {
  return {
    'Content-Type': 'application/json',
    'X-Gateway-Timestamp': String(ts),
    'X-Gateway-Signature': `sha256=${createHmac('sha256', secret).update(`${ts}.${body}`).digest('hex')}`,
  };
}

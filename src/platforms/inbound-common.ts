import { MalformedPayloadError } from '../errors.js';
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { InboundRequest, NormalisedRecord, VerifyOutcome } from './types.js';

/** Message kinds as the records name them. */
export type MessageType = Extract<NormalisedRecord, { kind: 'message' }>['message']['type'];

/**
 * Constant-time string comparison. Both sides are hashed first so neither the length nor the
 * content of the expected value leaks through timing.
 */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

export function hmacHex(algorithm: 'sha256' | 'sha1', key: string, data: Buffer | string): string {
  return createHmac(algorithm, key).update(data).digest('hex');
}

/** A non-empty string field of a decrypted connection config, or undefined. */
export function configString(config: Record<string, unknown>, key: string): string | undefined {
  const v = config[key];
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

/** The JSON of a raw body, or undefined when it is not JSON. */
export function parseJson(raw: Buffer): unknown {
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    return undefined;
  }
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The JSON object of a raw body; throws (the worker turns it into an unrecoverable job) when it is not one. */
export function jsonObject(raw: Buffer, platform: string): Record<string, unknown> {
  const body = parseJson(raw);
  if (!isObject(body)) throw new MalformedPayloadError(platform, `${platform} delivery is not a JSON object`);
  return body;
}

/**
 * A dedupe key from the platform ids a delivery carries. Short keys stay readable (Bull
 * Board shows them in the job id); long ones (a batch of WhatsApp ids) are hashed.
 */
export function dedupeOf(parts: string[]): string | undefined {
  if (parts.length === 0) return undefined;
  const joined = parts.join(',');
  return joined.length <= 120 ? joined : `h${createHash('sha256').update(joined).digest('hex').slice(0, 40)}`;
}

/** Dedupe key of a delivery carrying no platform id at all: its bytes (retries resend the same ones). */
export const bodyHash = (raw: Buffer) => `b${createHash('sha256').update(raw).digest('hex').slice(0, 40)}`;

/** Unix seconds (number or numeric string, as platforms send them) as ISO 8601; `fallback` when absent. */
export function unixToIso(seconds: unknown, fallback = new Date(0).toISOString()): string {
  const n = typeof seconds === 'string' ? Number(seconds) : seconds;
  return typeof n === 'number' ? msToIsoOr(n * 1000, fallback) : fallback;
}

/**
 * Milliseconds since the epoch as ISO 8601, or `fallback` when there is no such date: a
 * sender's timestamp can be anything, and `toISOString` throws beyond ±8.64e15 ms.
 */
export function msToIsoOr(ms: number, fallback = new Date(0).toISOString()): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? fallback : d.toISOString();
}

/** Message type from a mime type, for platforms that only give the file's type. */
export function typeOfMime(mime: string | undefined): MessageType {
  if (!mime) return 'document';
  if (mime.startsWith('image/')) return 'image';
  if (mime.startsWith('audio/')) return 'audio';
  if (mime.startsWith('video/')) return 'video';
  return 'document';
}

export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined);

export const ok: VerifyOutcome = { ok: true };
export const refuse = (reason: string): VerifyOutcome => ({ ok: false, reason });

/**
 * Replay protection shared by every timestamped signature scheme (Slack, Discord, our e-mail
 * inbound): a signed request is only good within five minutes of our clock, so a captured
 * request cannot be replayed later.
 */
const REPLAY_WINDOW_S = 300;

/**
 * Refuses a request whose signed Unix-seconds timestamp is not a plain number within
 * REPLAY_WINDOW_S of `nowMs`; `ok` otherwise (the signature itself is checked separately).
 */
export function replayWindow(timestamp: string, nowMs: number): VerifyOutcome {
  return /^\d{1,12}$/.test(timestamp) && Math.abs(nowMs / 1000 - Number(timestamp)) <= REPLAY_WINDOW_S
    ? ok
    : refuse('request timestamp outside the five-minute window');
}

/** A header of the request (names are lower-cased by the receiver). */
export const header = (req: Pick<InboundRequest, 'headers'>, name: string): string | undefined => req.headers[name.toLowerCase()];

import type { PlatformError, PlatformErrorCode } from './types.js';

/** Which gateway codes are worth retrying: the platform may well accept the same call later. */
const RETRYABLE: ReadonlySet<PlatformErrorCode> = new Set(['PLATFORM_RATE_LIMITED', 'PLATFORM_UNAVAILABLE']);

/** One platform failure as the send worker and the API see it. */
export function platformError(
  code: PlatformErrorCode,
  message: string,
  extra: { platformCode?: string | number; platformMessage?: string; retryAfterMs?: number } = {},
): PlatformError {
  return {
    code,
    message,
    retryable: RETRYABLE.has(code),
    ...(extra.retryAfterMs !== undefined && Number.isFinite(extra.retryAfterMs)
      ? { retryAfterMs: Math.max(0, Math.ceil(extra.retryAfterMs)) }
      : {}),
    ...(extra.platformCode !== undefined ? { platformCode: extra.platformCode } : {}),
    ...(extra.platformMessage ? { platformMessage: extra.platformMessage.slice(0, 500) } : {}),
  };
}

/**
 * `Retry-After` in ms: delta-seconds (fractions allowed, as Discord sends) or an HTTP date.
 * Undefined when absent or unreadable.
 */
export function retryAfterHeaderMs(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v.trim() === '') return undefined;
  const seconds = Number(v);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}

/**
 * The generic reading of an HTTP status, for platforms (or answers) without a more precise
 * code: 401/403 bad credentials, 429 rate limited, 5xx the platform's trouble, other 4xx a
 * refusal of this message.
 */
export function fromHttpStatus(
  status: number,
  platform: string,
  extra: { platformCode?: string | number; platformMessage?: string; retryAfterMs?: number } = {},
): PlatformError {
  const text = extra.platformMessage ? `: ${extra.platformMessage}` : '';
  if (status === 401 || status === 403)
    return platformError('PLATFORM_AUTH_FAILED', `${platform} refused the connection's credentials (HTTP ${status})${text}`, extra);
  if (status === 429) return platformError('PLATFORM_RATE_LIMITED', `${platform} rate limit reached${text}`, extra);
  if (status >= 500) return platformError('PLATFORM_UNAVAILABLE', `${platform} answered HTTP ${status}${text}`, extra);
  return platformError('PLATFORM_REJECTED', `${platform} refused the message (HTTP ${status})${text}`, extra);
}

/**
 * Failures that happen before a byte of the request can have reached the platform: the call
 * can be made again without risk of a second copy.
 */
const NEVER_SENT = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * A call that got no usable answer: refused, reset, timed out. Never echoes the URL (it may
 * hold a token). A call that never connected is retried; one the platform may have read
 * (timed out waiting for the answer, connection cut mid-call) is DELIVERY_UNCERTAIN and not
 * repeated, since a platform that read it may have delivered it and none of them deduplicates
 * a repeat. Pass `{ repeatable: true }` for a call whose repeat creates no second copy (an
 * upload that is only referenced by a later call).
 */
export function networkFailure(platform: string, err: unknown, options: { repeatable?: boolean } = {}): PlatformError {
  const e = err as { code?: string; name?: string; reason?: string } | undefined;
  const timedOut =
    e?.name === 'TimeoutError' || e?.name === 'AbortError' || e?.code === 'UND_ERR_HEADERS_TIMEOUT' || e?.code === 'UND_ERR_BODY_TIMEOUT';
  if (e?.code === 'ETARGETREFUSED') {
    // Nothing was sent. The reason names the host that was refused: the connection's
    // api_base_url, or a URL the platform's own answer pointed to (an upload URL).
    return platformError(
      'PLATFORM_REJECTED',
      `The call to ${platform} was refused by the outbound address policy: ${e.reason ?? 'the address it leads to is not public'}`,
    );
  }
  const why = timedOut ? 'timed out' : `failed (${e?.code ?? e?.name ?? 'network error'})`;
  if (options.repeatable || NEVER_SENT.has(e?.code ?? '')) return platformError('PLATFORM_UNAVAILABLE', `The call to ${platform} ${why}`);
  return platformError(
    'DELIVERY_UNCERTAIN',
    `The call to ${platform} ${why} after it was sent; the platform may or may not have delivered the message, so it was not sent again`,
  );
}

/**
 * An answer that is not what the platform documents. A failure status is the platform being
 * unwell (retried); a success status with a body we cannot read may mean the message went
 * out, so it is not retried: a duplicate is worse than a reported failure.
 */
export function unexpectedAnswer(platform: string, status: number): PlatformError {
  const e = platformError('PLATFORM_UNAVAILABLE', `${platform} answered HTTP ${status} with an unexpected body`);
  return status >= 200 && status < 300 ? { ...e, retryable: false } : e;
}

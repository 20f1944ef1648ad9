import type { FormData } from 'undici';
import { callPlatform } from './http-client.js';
import { fromHttpStatus, networkFailure, platformError, retryAfterHeaderMs, unexpectedAnswer } from './http-errors.js';
import type { PlatformError } from './types.js';

/** Graph API version used when a connection names none. */
export const GRAPH_VERSION = 'v21.0';
export const GRAPH_BASE = 'https://graph.facebook.com';

/** The Graph API error envelope shared by WhatsApp, Messenger and Instagram. */
export interface GraphErrorBody {
  error?: {
    message?: string;
    type?: string;
    code?: number;
    error_subcode?: number;
    error_data?: { details?: string; messaging_product?: string };
    fbtrace_id?: string;
  };
}

/** Codes that mean "slow down", with the wait each documents or implies (ms). */
const RATE_LIMITS: Record<number, number> = {
  130429: 1_000, // WhatsApp throughput limit (~80 msg/s per number)
  131056: 6_000, // WhatsApp pair rate limit (~1 msg / 6 s to one user)
  131048: 60_000, // WhatsApp spam rate limit
  80007: 60_000, // WhatsApp Business account rate limit
  4: 60_000, // application call limit
  17: 60_000, // user call limit
  32: 60_000, // page call limit
  613: 60_000, // calls within one hour exceeded
};
/** Access token invalid, expired or lacking permission: the connection's credentials are at fault. */
const AUTH = new Set([190, 102, 463, 467, 3, 10, 131005, 131031, 200, 230, 294, 299]);
/** The platform's own transient trouble. */
const TRANSIENT = new Set([1, 2, 131000, 131016, 133004]);
/** The 24-hour customer-service window has closed: a template (WhatsApp) or a tag (Messenger) is needed. */
const WINDOW_SUBCODES = new Set([2018278, 2534022]);

/**
 * Maps a Graph API error by its `code` (and `error_subcode`), not by HTTP status — Meta
 * answers most refusals with HTTP 400 (Meta's Graph API reference). Unknown codes fall back to the status.
 */
function graphError(
  platform: string,
  status: number,
  body: GraphErrorBody | undefined,
  headers: Record<string, string | string[] | undefined> = {},
): PlatformError {
  const e = body?.error;
  const code = e?.code;
  const platformMessage = [e?.message, e?.error_data?.details].filter(Boolean).join(' — ') || undefined;
  const extra = { platformCode: code ?? status, platformMessage };
  if (code === undefined) return fromHttpStatus(status, platform, { ...extra, retryAfterMs: retryAfterHeaderMs(headers['retry-after']) });
  if (code === 131047 || (e?.error_subcode !== undefined && WINDOW_SUBCODES.has(e.error_subcode))) {
    return platformError(
      'REPLY_WINDOW_CLOSED',
      `The 24-hour reply window with this user is closed: ${platform} only allows a template message until they write again`,
      extra,
    );
  }
  if (code in RATE_LIMITS) {
    return platformError('PLATFORM_RATE_LIMITED', `${platform} rate limit reached (code ${code})`, {
      ...extra,
      retryAfterMs: retryAfterHeaderMs(headers['retry-after']) ?? RATE_LIMITS[code],
    });
  }
  if (code === 131026)
    return platformError(
      'PLATFORM_REJECTED',
      `${platform} cannot deliver to this recipient (not on the platform, or unable to receive)`,
      extra,
    );
  if (code === 551 || code === 1545041)
    return platformError('RECIPIENT_BLOCKED', `${platform}: this person is not available to receive messages from the page`, extra);
  if (code === 100 && e?.error_subcode === 2018001)
    return platformError('INVALID_RECIPIENT', `${platform} has no user with this id for the page`, extra);
  if (AUTH.has(code))
    return platformError('PLATFORM_AUTH_FAILED', `${platform} refused the connection's access token (code ${code})`, extra);
  if (TRANSIENT.has(code) || status >= 500)
    return platformError('PLATFORM_UNAVAILABLE', `${platform} had a temporary problem (code ${code})`, extra);
  return platformError(
    'PLATFORM_REJECTED',
    `${platform} refused the message (code ${code})${platformMessage ? `: ${platformMessage}` : ''}`,
    extra,
  );
}

/** One authenticated Graph call; success answers as parsed JSON, anything else as a mapped error. */
export async function graphCall<T>(
  platform: string,
  call: { url: string; token: string; json?: unknown; multipart?: FormData; timeoutMs: number; guarded?: boolean },
): Promise<{ ok: true; body: T } | { ok: false; error: PlatformError }> {
  let answer: Awaited<ReturnType<typeof callPlatform>>;
  try {
    answer = await callPlatform({
      method: 'POST',
      url: call.url,
      headers: { authorization: `Bearer ${call.token}` },
      json: call.json,
      multipart: call.multipart,
      timeoutMs: call.timeoutMs,
      guarded: call.guarded,
    });
  } catch (err) {
    return { ok: false, error: networkFailure(platform, err) };
  }
  const body = answer.json as (T & GraphErrorBody) | undefined;
  if (answer.status >= 200 && answer.status < 300 && body && typeof body === 'object' && !body.error) return { ok: true, body };
  if (body && typeof body === 'object' && body.error)
    return { ok: false, error: graphError(platform, answer.status, body, answer.headers) };
  if (answer.status >= 300)
    return {
      ok: false,
      error: fromHttpStatus(answer.status, platform, { retryAfterMs: retryAfterHeaderMs(answer.headers['retry-after']) }),
    };
  return { ok: false, error: unexpectedAnswer(platform, answer.status) };
}

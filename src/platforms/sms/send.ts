import { baseUrl, callPlatform } from '../http-client.js';
import { fromHttpStatus, networkFailure, platformError, retryAfterHeaderMs, unexpectedAnswer } from '../http-errors.js';
import { sendHalf, type OutboundMessage, type PlatformError, type SendContext, type SendOutcome } from '../types.js';
import { SMS_SECRETS, smsConfig, type SmsConfig } from './config.js';

/** E.164: a plus, a country code not starting with 0, at most 15 digits in all. */
const E164 = /^\+[1-9]\d{6,14}$/;

function e164(to: string): string | undefined {
  return E164.test(to) ? undefined : `"${to}" is not a phone number in international E.164 form (e.g. +14155550123)`;
}

const REAL_BASE = 'https://api.twilio.com';
/** Twilio's limit on one (concatenated) SMS body. */
const SMS_TEXT_LIMIT = 1600;

interface TwilioErrorBody {
  code?: number;
  message?: string;
  more_info?: string;
  status?: number;
}

/** Twilio REST errors: HTTP status plus a numeric Twilio `code` that says precisely what failed. */
function twilioError(status: number, body: TwilioErrorBody | undefined, retryAfterMs?: number): PlatformError {
  const extra = { platformCode: body?.code ?? status, platformMessage: body?.message, retryAfterMs };
  switch (body?.code) {
    case 20003:
    case 20404:
      return platformError('PLATFORM_AUTH_FAILED', 'Twilio refused the account SID / auth token', extra);
    case 21211:
    case 21614:
      return platformError('INVALID_RECIPIENT', `Twilio cannot send SMS to this number: ${body.message ?? 'invalid To'}`, extra);
    case 21610:
      return platformError('RECIPIENT_BLOCKED', 'The recipient has opted out (replied STOP) and cannot be messaged', extra);
    case 21617:
      return platformError('MESSAGE_TOO_LONG', 'Twilio: the message body exceeds 1600 characters', extra);
    case 20429:
    case 14107:
      return platformError('PLATFORM_RATE_LIMITED', 'Twilio rate limit reached', { ...extra, retryAfterMs: retryAfterMs ?? 1000 });
    case 20500:
    case 20503:
      return platformError('PLATFORM_UNAVAILABLE', `Twilio had a temporary problem (${body.code})`, extra);
  }
  if (status === 429)
    return platformError('PLATFORM_RATE_LIMITED', 'Twilio rate limit reached', { ...extra, retryAfterMs: retryAfterMs ?? 1000 });
  if (status === 401) return platformError('PLATFORM_AUTH_FAILED', 'Twilio refused the account SID / auth token', extra);
  if (status >= 500) return fromHttpStatus(status, 'Twilio', extra);
  return platformError(
    'PLATFORM_REJECTED',
    `Twilio refused the message${body?.message ? `: ${body.message}` : ` (HTTP ${status})`}`,
    extra,
  );
}

/**
 * Creates a Message resource (form-encoded, basic auth). Twilio reports delivery later to
 * StatusCallback, which is the connection's inbound URL.
 */
async function send(config: SmsConfig, m: OutboundMessage, ctx: SendContext): Promise<SendOutcome> {
  const url = `${baseUrl(config, ctx, REAL_BASE)}/2010-04-01/Accounts/${config.account_sid}/Messages.json`;
  const form: Record<string, string> = { To: m.to, Body: m.text };
  if (config.messaging_service_sid) form.MessagingServiceSid = config.messaging_service_sid;
  else form.From = config.from!;
  if (ctx.webhookUrl) form.StatusCallback = ctx.webhookUrl;
  let answer: Awaited<ReturnType<typeof callPlatform>>;
  try {
    answer = await callPlatform({
      method: 'POST',
      url,
      headers: { authorization: `Basic ${Buffer.from(`${config.account_sid}:${config.auth_token}`).toString('base64')}` },
      form,
      timeoutMs: ctx.timeoutMs,
      guarded: ctx.guarded,
    });
  } catch (err) {
    return { ok: false, error: networkFailure('Twilio', err) };
  }
  const body = answer.json as ({ sid?: string } & TwilioErrorBody) | undefined;
  if (answer.status >= 200 && answer.status < 300) {
    return typeof body?.sid === 'string'
      ? { ok: true, externalMessageId: body.sid }
      : { ok: false, error: unexpectedAnswer('Twilio', answer.status) };
  }
  return { ok: false, error: twilioError(answer.status, body, retryAfterHeaderMs(answer.headers['retry-after'])) };
}

export const smsSend = sendHalf<SmsConfig>({
  configSchema: smsConfig,
  secretFields: SMS_SECRETS,
  maxTextLength: SMS_TEXT_LIMIT,
  acceptsFiles: false,
  checkRecipient: e164,
  send,
});

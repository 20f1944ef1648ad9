import { baseUrl, callPlatform } from '../http-client.js';
import { fromHttpStatus, networkFailure, platformError, retryAfterHeaderMs, unexpectedAnswer } from '../http-errors.js';
import { multipartOf } from '../multipart.js';
import { sendHalf, type OutboundMessage, type PlatformError, type SendContext, type SendOutcome } from '../types.js';
import { DISCORD_SECRETS, discordConfig, type DiscordConfig } from './config.js';

/** Discord snowflakes: 17 to 20 digits. */
function discordSnowflake(to: string): string | undefined {
  return /^\d{17,20}$/.test(to) ? undefined : `"${to}" is not a Discord channel id (a 17 to 20 digit snowflake)`;
}

const REAL_BASE = 'https://discord.com';
const DISCORD_TEXT_LIMIT = 2000;

interface DiscordErrorBody {
  code?: number;
  message?: string;
  /** 429 only: seconds, fractional. */
  retry_after?: number;
  global?: boolean;
  errors?: { content?: { _errors?: { code?: string }[] } };
}

/**
 * Discord errors carry a JSON `code` beside the HTTP status; a 429 carries `retry_after`
 * (float seconds) in the body and `Retry-After` in the headers (the platform's API reference).
 */
function discordError(
  status: number,
  body: DiscordErrorBody | undefined,
  headers: Record<string, string | string[] | undefined> = {},
): PlatformError {
  const extra = { platformCode: body?.code ?? status, platformMessage: body?.message };
  if (status === 429) {
    const ms = typeof body?.retry_after === 'number' ? body.retry_after * 1000 : retryAfterHeaderMs(headers['retry-after']);
    return platformError('PLATFORM_RATE_LIMITED', `Discord rate limit reached${body?.global ? ' (global)' : ''}`, {
      ...extra,
      retryAfterMs: ms ?? 1000,
    });
  }
  if (status === 401 || body?.code === 40001) return platformError('PLATFORM_AUTH_FAILED', 'Discord does not accept the bot token', extra);
  if (body?.code === 10003 || body?.code === 10013) return platformError('INVALID_RECIPIENT', 'Discord has no such channel', extra);
  if (body?.code === 50007) return platformError('RECIPIENT_BLOCKED', 'Discord cannot send messages to this user', extra);
  // The bot has not been added to the channel (or cannot see it): like a user who never started a bot.
  if (body?.code === 50001)
    return platformError('RECIPIENT_NOT_STARTED', 'The bot has no access to this channel; add it to the channel first', extra);
  if (body?.code === 50035 && body.errors?.content?._errors?.some((e) => e.code === 'BASE_TYPE_MAX_LENGTH'))
    return platformError('MESSAGE_TOO_LONG', 'Discord: the message content is too long', extra);
  if (status >= 500) return fromHttpStatus(status, 'Discord', extra);
  return platformError(
    'PLATFORM_REJECTED',
    `Discord refused the message${body?.message ? `: ${body.message}` : ` (HTTP ${status})`}`,
    extra,
  );
}

/** `content` as JSON; with files, multipart with `payload_json` and `files[n]` (Discord's upload form). */
async function send(config: DiscordConfig, m: OutboundMessage, ctx: SendContext): Promise<SendOutcome> {
  const url = `${baseUrl(config, ctx, REAL_BASE)}/api/v10/channels/${m.to}/messages`;
  const files = m.files ?? [];
  const payload = { content: m.text, ...(files.length ? { attachments: files.map((f, i) => ({ id: i, filename: f.filename })) } : {}) };
  let answer: Awaited<ReturnType<typeof callPlatform>>;
  try {
    answer = await callPlatform({
      method: 'POST',
      url,
      headers: { authorization: `Bot ${config.bot_token}` },
      timeoutMs: ctx.timeoutMs,
      guarded: ctx.guarded,
      ...(files.length
        ? {
            multipart: multipartOf(
              { payload_json: JSON.stringify(payload) },
              files.map((f, i) => [`files[${i}]`, f] as [string, typeof f]),
            ),
          }
        : { json: payload }),
    });
  } catch (err) {
    return { ok: false, error: networkFailure('Discord', err) };
  }
  const body = answer.json as ({ id?: string } & DiscordErrorBody) | undefined;
  if (answer.status >= 200 && answer.status < 300) {
    return typeof body?.id === 'string'
      ? { ok: true, externalMessageId: body.id }
      : { ok: false, error: unexpectedAnswer('Discord', answer.status) };
  }
  return { ok: false, error: discordError(answer.status, body, answer.headers) };
}

export const discordSend = sendHalf<DiscordConfig>({
  configSchema: discordConfig,
  secretFields: DISCORD_SECRETS,
  maxTextLength: DISCORD_TEXT_LIMIT,
  acceptsFiles: true,
  checkRecipient: discordSnowflake,
  send,
});

import type { FormData } from 'undici';
import { baseUrl, callPlatform } from '../http-client.js';
import { fromHttpStatus, networkFailure, platformError, unexpectedAnswer } from '../http-errors.js';
import { multipartOf } from '../multipart.js';
import { sendHalf, type OutboundFile, type OutboundMessage, type PlatformError, type SendContext, type SendOutcome } from '../types.js';
import { TELEGRAM_SECRETS, telegramConfig, type TelegramConfig } from './config.js';

/** Telegram chat ids are integers: users positive, groups and channels negative. */
function telegramChatId(to: string): string | undefined {
  return /^-?[1-9]\d{0,19}$/.test(to) ? undefined : `"${to}" is not a numeric Telegram chat id`;
}

const REAL_BASE = 'https://api.telegram.org';
const TELEGRAM_TEXT_LIMIT = 4096;
/** Captions are shorter than messages; a longer text goes as its own message before the files. */
const CAPTION_LIMIT = 1024;
/** sendPhoto takes photos up to 10 MB; a bigger picture goes as a document. */
const PHOTO_MAX_BYTES = 10 * 1024 * 1024;

interface TelegramAnswer {
  ok?: boolean;
  result?: { message_id?: number };
  error_code?: number;
  description?: string;
  parameters?: { retry_after?: number };
}

/**
 * Maps a Bot API error (the platform's API reference) to a gateway error: 429 with `retry_after`; 403 "bot
 * was blocked by the user" and "can't initiate conversation" (the user never started the
 * bot); 401/404 a bad token (the method path is fixed, so a 404 names a token that is no bot).
 */
function telegramError(status: number, body: TelegramAnswer | undefined, retryAfterHeader?: number): PlatformError {
  const description = body?.description ?? '';
  const extra = { platformCode: body?.error_code ?? status, platformMessage: description || undefined };
  const code = body?.error_code ?? status;
  if (code === 429) {
    const seconds = body?.parameters?.retry_after;
    return platformError('PLATFORM_RATE_LIMITED', `Telegram rate limit reached${seconds ? `; retry after ${seconds} s` : ''}`, {
      ...extra,
      retryAfterMs: seconds !== undefined ? seconds * 1000 : retryAfterHeader,
    });
  }
  if (code === 403) {
    if (/can't initiate conversation|have no rights to send a message|bot can't send messages to bots/i.test(description)) {
      return platformError(
        'RECIPIENT_NOT_STARTED',
        'The user has not started a conversation with the bot; they must send it a message (or /start) first',
        extra,
      );
    }
    return platformError('RECIPIENT_BLOCKED', `Telegram refuses to deliver to this chat: ${description || 'forbidden'}`, extra);
  }
  if (code === 401 || code === 404) return platformError('PLATFORM_AUTH_FAILED', 'Telegram does not accept the bot token', extra);
  if (code === 400) {
    if (/chat not found|user not found|peer_id_invalid|chat_id is empty/i.test(description))
      return platformError('INVALID_RECIPIENT', `Telegram has no such chat: ${description}`, extra);
    if (/message is too long|caption is too long|text is too long/i.test(description))
      return platformError('MESSAGE_TOO_LONG', `Telegram: ${description}`, extra);
    return platformError('PLATFORM_REJECTED', `Telegram refused the message: ${description || 'bad request'}`, extra);
  }
  return fromHttpStatus(status, 'Telegram', extra);
}

/** The Bot API method that sends a file of this type (photos, videos MP4, audio MP3/M4A, voice OGG, else documents). */
function methodFor(file: OutboundFile): { method: string; field: string } {
  const mime = file.mimeType.toLowerCase();
  if (['image/jpeg', 'image/png', 'image/webp'].includes(mime) && file.data.length <= PHOTO_MAX_BYTES)
    return { method: 'sendPhoto', field: 'photo' };
  if (mime === 'audio/ogg' || mime === 'audio/opus') return { method: 'sendVoice', field: 'voice' };
  if (['audio/mpeg', 'audio/mp3', 'audio/mp4', 'audio/x-m4a', 'audio/m4a'].includes(mime)) return { method: 'sendAudio', field: 'audio' };
  if (mime === 'video/mp4') return { method: 'sendVideo', field: 'video' };
  return { method: 'sendDocument', field: 'document' };
}

async function call(
  config: TelegramConfig,
  ctx: SendContext,
  method: string,
  body: { json?: unknown; multipart?: FormData },
): Promise<SendOutcome> {
  // The token is part of the path: it must never reach an error message or a log line.
  const url = `${baseUrl(config, ctx, REAL_BASE)}/bot${config.bot_token}/${method}`;
  let answer: Awaited<ReturnType<typeof callPlatform>>;
  try {
    answer = await callPlatform({ method: 'POST', url, timeoutMs: ctx.timeoutMs, guarded: ctx.guarded, ...body });
  } catch (err) {
    return { ok: false, error: networkFailure('Telegram', err) };
  }
  const parsed = answer.json as TelegramAnswer | undefined;
  if (answer.status === 200 && parsed?.ok === true && parsed.result?.message_id !== undefined) {
    return { ok: true, externalMessageId: String(parsed.result.message_id) };
  }
  if (!parsed || typeof parsed !== 'object' || (answer.status < 300 && parsed.ok !== false)) {
    if (answer.status >= 400 && answer.status < 500 && answer.status !== 429)
      return { ok: false, error: telegramError(answer.status, undefined) };
    return { ok: false, error: unexpectedAnswer('Telegram', answer.status) };
  }
  const header = Number(answer.headers['retry-after']);
  return { ok: false, error: telegramError(answer.status, parsed, Number.isFinite(header) ? header * 1000 : undefined) };
}

/**
 * Sends text with sendMessage, files with sendPhoto/sendDocument/sendVoice/… (multipart).
 * With files the text rides as the first file's caption when it fits, otherwise it goes
 * first as its own message; the id answered is the first message's.
 */
async function send(config: TelegramConfig, m: OutboundMessage, ctx: SendContext): Promise<SendOutcome> {
  const files = m.files ?? [];
  const textAsCaption = files.length > 0 && m.text.length <= CAPTION_LIMIT;
  let first: SendOutcome | undefined;
  if (m.text.length > 0 && !textAsCaption) {
    first = await call(config, ctx, 'sendMessage', {
      json: { chat_id: m.to, text: m.text, ...(m.parseMode ? { parse_mode: m.parseMode } : {}) },
    });
    if (!first.ok) return first;
  }
  for (const [i, file] of files.entries()) {
    const { method, field } = methodFor(file);
    const caption =
      i === 0 && textAsCaption && m.text.length > 0 ? { caption: m.text, ...(m.parseMode ? { parse_mode: m.parseMode } : {}) } : {};
    const outcome = await call(config, ctx, method, { multipart: multipartOf({ chat_id: m.to, ...caption }, [[field, file]]) });
    if (!outcome.ok) return outcome;
    first ??= outcome;
  }
  return first ?? { ok: false, error: platformError('PLATFORM_REJECTED', 'Nothing to send: no text and no files') };
}

export const telegramSend = sendHalf<TelegramConfig>({
  configSchema: telegramConfig,
  secretFields: TELEGRAM_SECRETS,
  maxTextLength: TELEGRAM_TEXT_LIMIT,
  acceptsFiles: true,
  checkRecipient: telegramChatId,
  send,
});

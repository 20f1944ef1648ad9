import { baseUrl, callPlatform, type PlatformAnswer } from '../http-client.js';
import { fromHttpStatus, networkFailure, platformError, retryAfterHeaderMs, unexpectedAnswer } from '../http-errors.js';
import { sendHalf, type OutboundFile, type OutboundMessage, type PlatformError, type SendContext, type SendOutcome } from '../types.js';
import { SLACK_SECRETS, slackConfig, type SlackConfig } from './config.js';

/** Slack conversation ids (C…, D…, G…) or a user id (U…/W…) to open a DM with. */
function slackChannel(to: string): string | undefined {
  return /^[CDGUW][A-Z0-9]{6,}$/.test(to) ? undefined : `"${to}" is not a Slack channel or user id (e.g. C0123456789)`;
}

const REAL_BASE = 'https://slack.com';
/** Slack truncates `text` after 40,000 characters; refusing is better than a silent cut. */
const SLACK_TEXT_LIMIT = 40_000;

const AUTH = new Set([
  'invalid_auth',
  'not_authed',
  'account_inactive',
  'token_revoked',
  'token_expired',
  'no_permission',
  'missing_scope',
  'not_allowed_token_type',
  'ekm_access_denied',
  'access_denied',
  'team_access_not_granted',
  'org_login_required',
]);
const TRANSIENT = new Set(['fatal_error', 'internal_error', 'service_unavailable', 'request_timeout', 'team_added_to_org']);

/**
 * Slack answers refusals with HTTP 200 `{ok:false, error:"…"}` (the platform's API reference) and rate
 * limits with HTTP 429 plus `Retry-After` seconds.
 */
function slackError(status: number, error: string | undefined, retryAfterMs?: number): PlatformError {
  const extra = { platformCode: error ?? status, platformMessage: error, retryAfterMs };
  if (status === 429 || error === 'ratelimited' || error === 'rate_limited')
    return platformError('PLATFORM_RATE_LIMITED', 'Slack rate limit reached', { ...extra, retryAfterMs: retryAfterMs ?? 1000 });
  if (!error) return status >= 300 ? fromHttpStatus(status, 'Slack', extra) : unexpectedAnswer('Slack', status);
  if (AUTH.has(error)) return platformError('PLATFORM_AUTH_FAILED', `Slack refused the bot token (${error})`, extra);
  if (TRANSIENT.has(error)) return platformError('PLATFORM_UNAVAILABLE', `Slack had a temporary problem (${error})`, extra);
  if (error === 'channel_not_found' || error === 'user_not_found')
    return platformError('INVALID_RECIPIENT', `Slack has no such channel visible to the bot (${error})`, extra);
  // The bot must be invited to a channel before it may post there: the recipient has not let it in yet.
  if (error === 'not_in_channel')
    return platformError('RECIPIENT_NOT_STARTED', 'The bot is not a member of this channel; invite it first', extra);
  if (error === 'is_archived' || error === 'cannot_dm_bot' || error === 'user_disabled')
    return platformError('RECIPIENT_BLOCKED', `Slack cannot deliver to this channel (${error})`, extra);
  if (error === 'msg_too_long') return platformError('MESSAGE_TOO_LONG', 'Slack: the message text is too long', extra);
  return platformError('PLATFORM_REJECTED', `Slack refused the message (${error})`, extra);
}

type SlackCall = { ok: true; body: Record<string, unknown> } | { ok: false; error: PlatformError };

function read(answer: PlatformAnswer): SlackCall {
  const body = answer.json as { ok?: boolean; error?: string } | undefined;
  if (answer.status === 200 && body?.ok === true) return { ok: true, body: body as Record<string, unknown> };
  return { ok: false, error: slackError(answer.status, body?.error, retryAfterHeaderMs(answer.headers['retry-after'])) };
}

/** Methods whose repeat posts nothing: an upload only appears once completeUploadExternal shares it. */
const REPEATABLE = new Set(['files.getUploadURLExternal']);

async function api(
  config: SlackConfig,
  ctx: SendContext,
  method: string,
  body: { json?: unknown; form?: Record<string, string> },
): Promise<SlackCall> {
  try {
    const answer = await callPlatform({
      method: 'POST',
      url: `${baseUrl(config, ctx, REAL_BASE)}/api/${method}`,
      headers: { authorization: `Bearer ${config.bot_token}` },
      timeoutMs: ctx.timeoutMs,
      guarded: ctx.guarded,
      ...body,
    });
    return read(answer);
  } catch (err) {
    return { ok: false, error: networkFailure('Slack', err, { repeatable: REPEATABLE.has(method) }) };
  }
}

/** Slack's external upload: reserve an upload URL, send the bytes there; the file is shared by completeUploadExternal. */
async function upload(
  config: SlackConfig,
  ctx: SendContext,
  file: OutboundFile,
): Promise<{ ok: true; id: string } | { ok: false; error: PlatformError }> {
  const reserved = await api(config, ctx, 'files.getUploadURLExternal', {
    form: { filename: file.filename, length: String(file.data.length) },
  });
  if (!reserved.ok) return reserved;
  const { upload_url: uploadUrl, file_id: id } = reserved.body as { upload_url?: string; file_id?: string };
  if (!uploadUrl || !id) return { ok: false, error: unexpectedAnswer('Slack', 200) };
  try {
    const put = await callPlatform({
      method: 'POST',
      url: uploadUrl,
      bytes: { data: file.data, contentType: file.mimeType },
      timeoutMs: ctx.timeoutMs,
      guarded: ctx.guarded,
    });
    if (put.status !== 200) return { ok: false, error: slackError(put.status, undefined, retryAfterHeaderMs(put.headers['retry-after'])) };
  } catch (err) {
    return { ok: false, error: networkFailure('Slack', err, { repeatable: true }) };
  }
  return { ok: true, id };
}

/**
 * Text through chat.postMessage (its `ts` is the message id: Slack identifies a message by
 * channel and ts); files uploaded and shared into the same channel (and thread).
 */
async function send(config: SlackConfig, m: OutboundMessage, ctx: SendContext): Promise<SendOutcome> {
  let externalMessageId: string | undefined;
  if (m.text.length > 0) {
    const posted = await api(config, ctx, 'chat.postMessage', {
      json: { channel: m.to, text: m.text, ...(m.threadId ? { thread_ts: m.threadId } : {}) },
    });
    if (!posted.ok) return posted;
    const ts = posted.body.ts;
    if (typeof ts !== 'string') return { ok: false, error: unexpectedAnswer('Slack', 200) };
    externalMessageId = ts;
  }
  const files = m.files ?? [];
  if (files.length > 0) {
    const ids: string[] = [];
    for (const file of files) {
      const up = await upload(config, ctx, file);
      if (!up.ok) return up;
      ids.push(up.id);
    }
    const done = await api(config, ctx, 'files.completeUploadExternal', {
      json: {
        files: files.map((f, i) => ({ id: ids[i], title: f.filename })),
        channel_id: m.to,
        ...(m.threadId ? { thread_ts: m.threadId } : {}),
      },
    });
    if (!done.ok) return done;
    externalMessageId ??= `file:${ids[0]}`;
  }
  return externalMessageId
    ? { ok: true, externalMessageId }
    : { ok: false, error: platformError('PLATFORM_REJECTED', 'Nothing to send: no text and no files') };
}

export const slackSend = sendHalf<SlackConfig>({
  configSchema: slackConfig,
  secretFields: SLACK_SECRETS,
  maxTextLength: SLACK_TEXT_LIMIT,
  acceptsFiles: true,
  checkRecipient: slackChannel,
  send,
});

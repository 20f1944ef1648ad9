import { isIP } from 'node:net';
import nodemailer from 'nodemailer';
import type SMTPTransport from 'nodemailer/lib/smtp-transport/index.js';
import { judgeUrl, resolvePublic } from '../../net/outbound-policy.js';
import { platformError } from '../http-errors.js';
import { sendHalf, type OutboundMessage, type PlatformError, type SendContext, type SendOutcome } from '../types.js';
import { EMAIL_SECRETS, emailAddress, emailConfig, type EmailConfig } from './config.js';

/** RFC 5322 recommends subject lines stay short; a first line used as subject is cut here. */
const SUBJECT_MAX = 200;

/** The subject given, else the text's first non-empty line (cut to a sensible length). */
export function subjectOf(m: Pick<OutboundMessage, 'subject' | 'text'>): string {
  if (m.subject !== undefined && m.subject.trim() !== '') return m.subject.trim();
  const line =
    m.text
      .split(/\r?\n/)
      .find((l) => l.trim() !== '')
      ?.trim() ?? '';
  return line.length > SUBJECT_MAX ? `${line.slice(0, SUBJECT_MAX - 1)}…` : line;
}

/** smtp_url with its server replaced by api_base_url's when that is set (credentials kept). */
function smtpServerUrl(config: EmailConfig): string {
  if (!config.api_base_url) return config.smtp_url;
  const url = new URL(config.smtp_url);
  const over = new URL(config.api_base_url);
  url.protocol = over.protocol;
  url.host = over.host;
  return url.toString();
}

/** A URL's user or password as typed (the URL keeps them percent-encoded). */
function decoded(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/**
 * nodemailer's options for a judged SMTP URL (`judgeUrl`) whose host was resolved to `address`:
 * the connection goes to that address (nodemailer resolves nothing itself), and a host name
 * stays the TLS server name, for SNI and the certificate check. Built from the URL's parts
 * only: nodemailer would read connection options (`proxy=`…) from a URL's query.
 * `requireTls` (the `public-https` policy): an `smtp://` session must upgrade with STARTTLS
 * before anything is sent, or fail; nodemailer would otherwise send the login and the message
 * in the clear to a server (or a man in the middle) that does not offer it.
 */
export function smtpTransportOptions(url: URL, host: string, address: string, requireTls: boolean): SMTPTransport.Options {
  const secure = url.protocol === 'smtps:';
  return {
    host: address,
    ...(url.port ? { port: Number(url.port) } : {}),
    secure,
    ...(requireTls && !secure ? { requireTLS: true } : {}),
    ...(url.username || url.password ? { auth: { user: decoded(url.username), pass: decoded(url.password) } } : {}),
    ...(isIP(host) ? {} : { servername: host }),
  };
}

/** The connection's SMTP server judged, and under the policy resolved, judged and pinned; or why not. */
async function smtpServer(
  config: EmailConfig,
  ctx: SendContext,
): Promise<{ ok: true; options: SMTPTransport.Options } | { ok: false; error: PlatformError }> {
  const refused = (why: string) => ({
    ok: false as const,
    error: platformError('PLATFORM_REJECTED', `The SMTP server was refused by the outbound address policy: ${why}`),
  });
  const judged = judgeUrl(smtpServerUrl(config), 'smtp', ctx.guarded ? 'public-https' : 'any');
  if (!judged.ok) return refused(judged.reason);
  if (!ctx.guarded) return { ok: true, options: smtpTransportOptions(judged.url, judged.host, judged.host, false) };
  const resolved = await resolvePublic(judged.host, ctx.timeoutMs);
  if (resolved.kind === 'refused') return refused(resolved.reason);
  if (resolved.kind === 'failed') {
    const code = resolved.error.code;
    return {
      ok: false,
      error: platformError('PLATFORM_UNAVAILABLE', `Could not resolve the SMTP server (${code})`, { platformCode: code }),
    };
  }
  return { ok: true, options: smtpTransportOptions(judged.url, judged.host, resolved.addresses[0].address, true) };
}

/**
 * SMTP failures by reply code: 5xx refusals are permanent (a bad mailbox → INVALID_RECIPIENT,
 * bad login → PLATFORM_AUTH_FAILED), 4xx are the server asking us to come back later,
 * connection trouble is the server being unavailable, and a session that stopped answering
 * midway is DELIVERY_UNCERTAIN.
 */
export function smtpError(err: unknown): PlatformError {
  const e = err as { code?: string; responseCode?: number; response?: string; command?: string; timeoutType?: string };
  const reply = e.response?.slice(0, 300);
  const extra = { platformCode: e.responseCode ?? e.code, platformMessage: reply };
  const rc = e.responseCode;
  if (e.code === 'EAUTH' || rc === 535 || rc === 534 || rc === 530)
    return platformError('PLATFORM_AUTH_FAILED', 'The SMTP server refused the login in smtp_url', extra);
  if (rc !== undefined && rc >= 400 && rc < 500) {
    if (/rate|too many|try again later/i.test(reply ?? ''))
      return platformError('PLATFORM_RATE_LIMITED', 'The SMTP server asks to slow down', { ...extra, retryAfterMs: 60_000 });
    return platformError('PLATFORM_UNAVAILABLE', `The SMTP server deferred the message (${rc})`, extra);
  }
  if (rc !== undefined && rc >= 500) {
    if (/RCPT/i.test(e.command ?? '') && [550, 551, 553, 501].includes(rc))
      return platformError('INVALID_RECIPIENT', `The SMTP server refused the recipient (${rc})`, extra);
    return platformError('PLATFORM_REJECTED', `The SMTP server refused the message (${rc})`, extra);
  }
  // A session that went silent after it was set up may have gone silent after the message's
  // final dot: the server may have queued it, and SMTP has no way to ask. Not sent again.
  if (e.code === 'ETIMEDOUT' && e.timeoutType === 'SOCKET_TIMEOUT')
    return platformError(
      'DELIVERY_UNCERTAIN',
      'The SMTP server stopped answering during the session; it may or may not have accepted the message, so it was not sent again',
      { platformCode: e.code },
    );
  if (e.code && ['ECONNECTION', 'ETIMEDOUT', 'ESOCKET', 'EDNS', 'ECONNREFUSED', 'ECONNRESET', 'ETLS', 'EPROTOCOL'].includes(e.code)) {
    return platformError('PLATFORM_UNAVAILABLE', `Could not reach the SMTP server (${e.code})`, { platformCode: e.code });
  }
  return platformError('PLATFORM_REJECTED', `The SMTP server refused the message${e.code ? ` (${e.code})` : ''}`, extra);
}

/**
 * One message over SMTP: the text is the body, files become attachments, and a reply to an
 * inbound e-mail carries In-Reply-To/References so mail clients thread it.
 */
async function send(config: EmailConfig, m: OutboundMessage, ctx: SendContext): Promise<SendOutcome> {
  const server = await smtpServer(config, ctx);
  if (!server.ok) return server;
  const transport = nodemailer.createTransport({
    ...server.options,
    connectionTimeout: ctx.timeoutMs,
    greetingTimeout: ctx.timeoutMs,
    socketTimeout: ctx.timeoutMs,
  });
  try {
    const info = await transport.sendMail({
      from: config.from,
      to: m.to,
      subject: subjectOf(m),
      text: m.text,
      ...(m.inReplyTo ? { inReplyTo: m.inReplyTo, references: m.inReplyTo } : {}),
      attachments: (m.files ?? []).map((f) => ({ filename: f.filename, content: f.data, contentType: f.mimeType })),
    });
    if (info.rejected?.length)
      return {
        ok: false,
        error: platformError('INVALID_RECIPIENT', 'The SMTP server refused the recipient', {
          platformMessage: String(info.response ?? ''),
        }),
      };
    return { ok: true, externalMessageId: info.messageId };
  } catch (err) {
    return { ok: false, error: smtpError(err) };
  } finally {
    transport.close();
  }
}

export const emailSend = sendHalf<EmailConfig>({
  configSchema: emailConfig,
  secretFields: EMAIL_SECRETS,
  acceptsFiles: true,
  checkRecipient: emailAddress,
  send,
});

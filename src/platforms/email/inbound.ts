import { MalformedPayloadError } from '../../errors.js';
import { z } from 'zod';
import { configString, dedupeOf, header, hmacHex, ok, parseJson, refuse, replayWindow, safeEqual, typeOfMime } from '../inbound-common.js';
import type { InboundHalf, InboundMedia, NormalisedRecord } from '../types.js';

const address = z.union([
  z.string().min(3).max(320),
  z.object({ address: z.string().min(3).max(320), name: z.string().max(300).optional() }),
]);

/**
 * Inbound e-mail, our own format (no e-mail provider has a standard one). Whatever receives
 * the mail — a provider's inbound-parse webhook behind a small relay, or an SMTP receiver —
 * POSTs this JSON to the connection's webhook URL with two headers:
 *
 *   X-Gateway-Timestamp: <Unix seconds>
 *   X-Gateway-Signature: sha256=<hex HMAC-SHA256(inbound_secret, "<timestamp>.<raw body>")>
 *
 * `inbound_secret` is the connection's config field. It is the scheme of our outbound webhook
 * signatures (docs/webhook-receiver.md), so one verifier serves both directions; requests more than 300 s off
 * are refused. Attachments travel inline (base64) or as a URL the worker downloads.
 */
export const inboundEmailSchema = z.object({
  /** The Message-ID header, with or without the angle brackets. */
  message_id: z.string().min(1).max(998),
  from: address,
  to: z.array(address).max(100).optional(),
  subject: z.string().max(998).optional(),
  text: z.string().optional(),
  html: z.string().optional(),
  in_reply_to: z.string().max(998).optional(),
  references: z.union([z.string(), z.array(z.string())]).optional(),
  /** The Date header (RFC 5322 or ISO 8601). */
  date: z.string().optional(),
  attachments: z
    .array(
      z
        .object({
          filename: z.string().max(255).optional(),
          content_type: z.string().max(255).optional(),
          content_base64: z.string().optional(),
          url: z.url().optional(),
        })
        .refine((a) => a.content_base64 !== undefined || a.url !== undefined, 'an attachment needs content_base64 or url'),
    )
    .max(20)
    .optional(),
});
export type InboundEmail = z.infer<typeof inboundEmailSchema>;

/** The HMAC our e-mail relays send; exported for relays written in TypeScript and for tests. */
export const emailSignature = (secret: string, timestamp: string, rawBody: Buffer | string) =>
  `sha256=${hmacHex('sha256', secret, Buffer.concat([Buffer.from(`${timestamp}.`), Buffer.isBuffer(rawBody) ? rawBody : Buffer.from(rawBody)]))}`;

/** Message ids in the bracketed form headers use, so replies can quote them in In-Reply-To. */
const bracketed = (id: string) => (id.trim().startsWith('<') ? id.trim() : `<${id.trim()}>`);
const addr = (a: z.infer<typeof address>) =>
  typeof a === 'string' ? { address: a.trim().toLowerCase() } : { address: a.address.trim().toLowerCase(), name: a.name };
const stripHtml = (html: string) =>
  html
    .replace(/<(script|style)[^>]*>[\s\S]*?<\/\1>/gi, '')
    .replace(/<[^>]+>/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();

function parse(raw: Buffer): InboundEmail | undefined {
  const r = inboundEmailSchema.safeParse(parseJson(raw));
  return r.success ? r.data : undefined;
}

export const emailInbound: InboundHalf = {
  verify(config, req) {
    const secret = configString(config, 'inbound_secret');
    if (!secret) return refuse('connection has no inbound_secret');
    const ts = header(req, 'x-gateway-timestamp');
    const given = header(req, 'x-gateway-signature');
    if (!ts || !given) return refuse('missing X-Gateway-Signature or X-Gateway-Timestamp');
    const fresh = replayWindow(ts, req.now);
    if (!fresh.ok) return fresh;
    return safeEqual(given, emailSignature(secret, ts, req.rawBody)) ? ok : refuse('invalid signature');
  },
  dedupeKey(req) {
    const mail = parse(req.rawBody);
    return mail ? dedupeOf([bracketed(mail.message_id)]) : undefined;
  },
  normalise({ rawBody, receivedAt }) {
    const r = inboundEmailSchema.safeParse(parseJson(rawBody));
    if (!r.success)
      throw new MalformedPayloadError('EMAIL', `EMAIL delivery does not match the inbound e-mail format: ${r.error.issues[0]?.message}`);
    const mail = r.data;
    const from = addr(mail.from);
    const to = (mail.to ?? []).map(addr);
    const date = mail.date ? new Date(mail.date) : undefined;
    const text = mail.text ?? (mail.html ? stripHtml(mail.html) : '');
    const references = typeof mail.references === 'string' ? mail.references.split(/\s+/).filter(Boolean) : (mail.references ?? []);
    const extra = {
      subject: mail.subject ?? '',
      message_id: bracketed(mail.message_id),
      ...(mail.in_reply_to ? { in_reply_to: bracketed(mail.in_reply_to) } : {}),
      ...(references.length ? { references: references.map(bracketed) } : {}),
      ...(to.length ? { to: to.map((t) => t.address) } : {}),
    };
    const first = mail.attachments?.[0];
    const media: InboundMedia | undefined = first && {
      ...(first.content_base64 !== undefined ? { inlineBase64: first.content_base64 } : { url: first.url }),
      ...(first.content_type ? { mimeType: first.content_type } : {}),
      ...(first.filename ? { filename: first.filename } : {}),
      ...(typeOfMime(first.content_type) === 'audio' ? { isAudio: true } : {}),
    };
    const more = (mail.attachments ?? []).slice(1).map((a) => ({ filename: a.filename, content_type: a.content_type }));
    const record: NormalisedRecord = {
      kind: 'message',
      externalMessageId: bracketed(mail.message_id),
      conversation: { externalId: from.address, ...(from.name ? { name: from.name } : {}) },
      sender: { externalId: from.address, ...(from.name ? { name: from.name } : {}) },
      ...(to[0] ? { recipient: { externalId: to[0].address } } : {}),
      message: media
        ? { text, type: typeOfMime(first!.content_type), media, extra: { ...extra, ...(more.length ? { more_attachments: more } : {}) } }
        : { text, type: 'text', extra },
      occurredAt: date && !Number.isNaN(date.getTime()) ? date.toISOString() : (receivedAt ?? new Date(0).toISOString()),
    };
    return [record];
  },
};

import { MalformedPayloadError } from '../../errors.js';
import { createHmac } from 'node:crypto';
import { configString, dedupeOf, header, ok, refuse, safeEqual, typeOfMime } from '../inbound-common.js';
import type { InboundHalf, InboundMedia, NormalisedRecord } from '../types.js';

/**
 * Twilio's request signature (the platform's API reference): the full URL as Twilio called it, then every
 * POST parameter sorted by name appended as name + value, HMAC-SHA1 with the Auth Token,
 * base64. A name given several times contributes each value, in sorted order.
 */
export function twilioSignature(url: string, params: [string, string][], authToken: string): string {
  const sorted = [...params].sort(([ka, va], [kb, vb]) => (ka < kb ? -1 : ka > kb ? 1 : va < vb ? -1 : va > vb ? 1 : 0));
  const data = url + sorted.map(([k, v]) => k + v).join('');
  return createHmac('sha1', authToken).update(data, 'utf8').digest('base64');
}

const MAX_MEDIA = 10;

const formOf = (raw: Buffer) => new URLSearchParams(raw.toString('utf8'));

/** Twilio's MessageStatus values that are delivery statuses of ours; queued/sending/accepted… are not reported. */
const STATUS: Record<string, 'sent' | 'delivered' | 'read' | 'failed'> = {
  sent: 'sent',
  delivered: 'delivered',
  read: 'read',
  failed: 'failed',
  undelivered: 'failed',
};
/** Statuses of a message someone sent us rather than of one we sent. */
const INBOUND_STATUS = new Set(['received', 'receiving']);

const sidOf = (f: URLSearchParams) => f.get('MessageSid') ?? f.get('SmsSid') ?? f.get('SmsMessageSid') ?? undefined;
const callbackStatus = (f: URLSearchParams) => {
  const s = f.get('MessageStatus') ?? undefined;
  return s && !INBOUND_STATUS.has(s) ? s : undefined;
};

function messageRecord(f: URLSearchParams, sid: string, occurredAt: string): NormalisedRecord | undefined {
  const from = f.get('From');
  if (!from) return undefined;
  const body = f.get('Body') ?? '';
  const to = f.get('To') ?? undefined;
  // Twilio attaches at most 10 media; the bound also keeps a hostile NumMedia from looping forever.
  const count = Math.min(Math.trunc(Number(f.get('NumMedia') ?? '0')) || 0, MAX_MEDIA);
  const media: InboundMedia[] = [];
  for (let i = 0; i < count; i++) {
    const url = f.get(`MediaUrl${i}`);
    const mime = f.get(`MediaContentType${i}`) ?? undefined;
    if (url)
      media.push({ url, platformFileId: url.split('/').pop(), mimeType: mime, ...(typeOfMime(mime) === 'audio' ? { isAudio: true } : {}) });
  }
  const first = media[0];
  return {
    kind: 'message',
    externalMessageId: sid,
    conversation: { externalId: from },
    sender: { externalId: from },
    ...(to ? { recipient: { externalId: to } } : {}),
    message: first
      ? {
          text: body,
          type: typeOfMime(first.mimeType),
          media: first,
          ...(body ? { caption: body } : {}),
          ...(media.length > 1 ? { extra: { more_media: media.slice(1).map((m) => ({ url: m.url, mime_type: m.mimeType })) } } : {}),
        }
      : { text: body, type: 'text' },
    occurredAt,
  };
}

/**
 * Twilio Programmable Messaging (the platform's API reference): form-encoded incoming messages and status
 * callbacks on the connection's dedicated URL, signed over PUBLIC_BASE_URL + path, answered
 * with empty TwiML, deduplicated on MessageSid (+ MessageStatus for callbacks).
 */
export const smsInbound: InboundHalf = {
  verify(config, req) {
    const token = configString(config, 'auth_token');
    if (!token) return refuse('connection has no auth_token');
    const given = header(req, 'x-twilio-signature');
    if (!given) return refuse('missing X-Twilio-Signature');
    const expected = twilioSignature(req.publicUrl, [...formOf(req.rawBody).entries()], token);
    return safeEqual(given, expected) ? ok : refuse('invalid signature');
  },
  dedupeKey(req) {
    const f = formOf(req.rawBody);
    const sid = sidOf(f);
    if (!sid) return undefined;
    const status = callbackStatus(f);
    return dedupeOf([status ? `${sid}.${status}` : sid]);
  },
  acknowledge: () => ({ status: 200, contentType: 'text/xml', body: '<?xml version="1.0" encoding="UTF-8"?><Response/>' }),
  normalise({ rawBody, receivedAt }) {
    // Twilio sends no timestamp: the time we received the request stands in for it.
    const occurredAt = receivedAt ?? new Date(0).toISOString();
    const f = formOf(rawBody);
    const sid = sidOf(f);
    if (!sid) throw new MalformedPayloadError('SMS', 'SMS delivery has no MessageSid');
    const status = callbackStatus(f);
    if (status) {
      const mapped = STATUS[status];
      if (!mapped) return [];
      const code = f.get('ErrorCode');
      const to = f.get('To');
      return [
        {
          kind: 'status',
          externalMessageId: sid,
          status: mapped,
          ...(to ? { recipient: { externalId: to } } : {}),
          ...(code ? { error: { code, message: f.get('ErrorMessage') ?? undefined } } : {}),
          occurredAt,
        },
      ];
    }
    const r = messageRecord(f, sid, occurredAt);
    return r ? [r] : [];
  },
};

import {
  configString,
  dedupeOf,
  msToIsoOr,
  header,
  hmacHex,
  isObject,
  jsonObject,
  ok,
  parseJson,
  refuse,
  replayWindow,
  safeEqual,
  str,
  typeOfMime,
  type MessageType,
} from '../inbound-common.js';
import type { InboundHalf, InboundMedia, NormalisedRecord } from '../types.js';

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined => (isObject(v) ? v : undefined);

/** A Slack message is identified by (channel, ts) (the platform's API reference). */
const slackMessageId = (channel: string, ts: string) => `${channel}:${ts}`;

/** Slack `ts` ("1700000000.000100") is Unix seconds with a sequence suffix. */
const tsToIso = (ts: string | undefined) => (ts ? msToIsoOr(Math.floor(Number(ts) * 1000)) : new Date(0).toISOString());

/** Message subtypes that are a person saying something; the rest (joins, topic changes, bots) are not messages to record. */
const SPOKEN = new Set([undefined, 'file_share', 'thread_broadcast', 'me_message']);

function fileMedia(files: unknown): { type: MessageType; media: InboundMedia } | undefined {
  const f = Array.isArray(files) ? obj(files[0]) : undefined;
  const url = str(f?.url_private_download) ?? str(f?.url_private);
  if (!f || !url) return undefined;
  const mime = str(f.mimetype);
  const type = typeOfMime(mime);
  return {
    type,
    media: { url, platformFileId: str(f.id), mimeType: mime, filename: str(f.name), ...(type === 'audio' ? { isAudio: true } : {}) },
  };
}

function messageRecord(e: Obj): NormalisedRecord | undefined {
  const channel = str(e.channel);
  let m = e;
  let edited = false;
  if (e.subtype === 'message_changed') {
    m = obj(e.message) ?? {};
    edited = true;
  } else if (!SPOKEN.has(str(e.subtype))) {
    return undefined;
  }
  // Our own bot's posts come back as events too; they are recorded as message.outbound already.
  if (m.bot_id || m.subtype === 'bot_message') return undefined;
  const user = str(m.user);
  const ts = str(m.ts);
  if (!channel || !user || !ts) return undefined;
  const threadTs = str(m.thread_ts);
  const text = str(m.text) ?? '';
  const file = fileMedia(m.files);
  return {
    kind: 'message',
    externalMessageId: slackMessageId(channel, ts),
    // A thread is its own conversation; its parent (thread_ts == ts) stays in the channel's.
    conversation: { externalId: channel, ...(threadTs && threadTs !== ts ? { threadId: threadTs } : {}) },
    sender: { externalId: user },
    message: file ? { text, type: file.type, media: file.media, ...(text ? { caption: text } : {}) } : { text, type: 'text' },
    ...(edited ? { edited: true } : {}),
    occurredAt: edited ? tsToIso(str(obj(m.edited)?.ts) ?? ts) : tsToIso(ts),
  };
}

function reactionRecord(e: Obj): NormalisedRecord | undefined {
  const item = obj(e.item);
  const channel = str(item?.channel);
  const ts = str(item?.ts);
  const user = str(e.user);
  if (item?.type !== 'message' || !channel || !ts || !user) return undefined;
  return {
    kind: 'reaction',
    targetExternalMessageId: slackMessageId(channel, ts),
    targetLocalId: ts,
    // Slack names reactions (":thumbsup:" without the colons) rather than sending the emoji.
    emoji: str(e.reaction) ?? '',
    action: e.type === 'reaction_removed' ? 'removed' : 'added',
    sender: { externalId: user },
    conversation: { externalId: channel },
    occurredAt: tsToIso(str(e.event_ts)),
  };
}

/**
 * Slack Events API (the platform's API reference): `v0` signatures over `v0:{timestamp}:{raw body}` with the
 * signing secret inside a five-minute window, `url_verification` answered with the
 * challenge, event callbacks deduplicated on `event_id`.
 */
export const slackInbound: InboundHalf = {
  verify(config, req) {
    const secret = configString(config, 'signing_secret');
    if (!secret) return refuse('connection has no signing_secret');
    const ts = header(req, 'x-slack-request-timestamp');
    const given = header(req, 'x-slack-signature');
    if (!ts || !given) return refuse('missing X-Slack-Signature or X-Slack-Request-Timestamp');
    const fresh = replayWindow(ts, req.now);
    if (!fresh.ok) return fresh;
    const expected = `v0=${hmacHex('sha256', secret, Buffer.concat([Buffer.from(`v0:${ts}:`), req.rawBody]))}`;
    return safeEqual(given, expected) ? ok : refuse('invalid signature');
  },
  handshake(_config, req) {
    if (req.method !== 'POST') return undefined;
    const body = parseJson(req.rawBody);
    if (!isObject(body) || body.type !== 'url_verification' || typeof body.challenge !== 'string') return undefined;
    return { status: 200, contentType: 'text/plain', body: body.challenge };
  },
  dedupeKey(req) {
    const body = parseJson(req.rawBody);
    const id = isObject(body) ? str(body.event_id) : undefined;
    return id ? dedupeOf([id]) : undefined;
  },
  normalise({ rawBody }) {
    const body = jsonObject(rawBody, 'SLACK');
    const e = obj(body.event);
    if (body.type !== 'event_callback' || !e) return [];
    const r =
      e.type === 'message' || e.type === 'app_mention'
        ? messageRecord(e)
        : e.type === 'reaction_added' || e.type === 'reaction_removed'
          ? reactionRecord(e)
          : undefined;
    return r ? [r] : [];
  },
};

import { bodyHash, dedupeOf, isObject, jsonObject, parseJson, str, type MessageType, msToIsoOr } from './inbound-common.js';
import { entryIds, hubChallenge, verifyHubSignature } from './meta-inbound.js';
import type { InboundHalf, InboundMedia, NormalisedRecord, PlatformName } from './types.js';

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined => (isObject(v) ? v : undefined);
const arr = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isObject) : []);

/** Messenger timestamps and watermarks are Unix milliseconds. */
const msToIso = (v: unknown) => {
  const n = typeof v === 'string' ? Number(v) : v;
  return typeof n === 'number' ? msToIsoOr(n) : new Date(0).toISOString();
};

const ATTACHMENT_TYPES: Record<string, MessageType> = { image: 'image', video: 'video', audio: 'audio', file: 'document' };

function messaging(body: Obj): Obj[] {
  return arr(body.entry).flatMap((e) => arr(e.messaging));
}

function messageOf(m: Obj): Extract<NormalisedRecord, { kind: 'message' }>['message'] {
  const text = str(m.text);
  const first = arr(m.attachments)[0];
  if (!first) return { text: text ?? '', type: 'text' };
  const payload = obj(first.payload) ?? {};
  const kind = str(first.type) ?? 'fallback';
  if (kind === 'location') {
    const c = obj(payload.coordinates) ?? {};
    return { text: text ?? '', type: 'location', location: { latitude: Number(c.lat), longitude: Number(c.long) } };
  }
  const url = str(payload.url);
  // Stickers arrive as images carrying a sticker_id.
  const type: MessageType = payload.sticker_id !== undefined ? 'sticker' : (ATTACHMENT_TYPES[kind] ?? 'other');
  const media: InboundMedia | undefined = url ? { url, ...(type === 'audio' ? { isAudio: true } : {}) } : undefined;
  const extra =
    arr(m.attachments).length > 1
      ? {
          more_attachments: arr(m.attachments)
            .slice(1)
            .map((a) => ({ type: a.type, url: obj(a.payload)?.url })),
        }
      : undefined;
  return {
    text: text ?? '',
    type,
    ...(media ? { media } : {}),
    ...(text !== undefined ? { caption: text } : {}),
    ...(kind !== 'image' && !ATTACHMENT_TYPES[kind]
      ? { extra: { attachment_type: kind, ...(url ? { url } : {}), ...extra } }
      : extra
        ? { extra }
        : {}),
  };
}

function records(item: Obj): NormalisedRecord[] {
  const sender = str(obj(item.sender)?.id);
  const recipient = str(obj(item.recipient)?.id);
  if (!sender) return [];
  const occurredAt = msToIso(item.timestamp);
  const party = { externalId: sender };
  const message = obj(item.message);
  if (message) {
    // Echoes are our own sends coming back: they are recorded as message.outbound by the send worker.
    if (message.is_echo) return [];
    const mid = str(message.mid);
    if (!mid) return [];
    return [
      {
        kind: 'message',
        externalMessageId: mid,
        conversation: { externalId: sender },
        sender: party,
        ...(recipient ? { recipient: { externalId: recipient } } : {}),
        message: messageOf(message),
        occurredAt,
      },
    ];
  }
  const edit = obj(item.message_edit);
  if (edit && str(edit.mid)) {
    return [
      {
        kind: 'message',
        externalMessageId: str(edit.mid)!,
        conversation: { externalId: sender },
        sender: party,
        message: { text: str(edit.text) ?? '', type: 'text' },
        edited: true,
        occurredAt,
      },
    ];
  }
  const delivery = obj(item.delivery);
  if (delivery) {
    const mids = Array.isArray(delivery.mids) ? delivery.mids.filter((x): x is string => typeof x === 'string') : [];
    // Named messages are delivered; the watermark also covers everything sent before it.
    const named: NormalisedRecord[] = mids.map((mid) => ({
      kind: 'status',
      externalMessageId: mid,
      status: 'delivered',
      recipient: party,
      occurredAt,
    }));
    return delivery.watermark !== undefined
      ? [...named, { kind: 'watermark', status: 'delivered', recipient: party, upTo: msToIso(delivery.watermark), occurredAt }]
      : named;
  }
  const read = obj(item.read);
  if (read && read.watermark !== undefined)
    return [{ kind: 'watermark', status: 'read', recipient: party, upTo: msToIso(read.watermark), occurredAt }];
  const reaction = obj(item.reaction);
  if (reaction && str(reaction.mid)) {
    return [
      {
        kind: 'reaction',
        targetExternalMessageId: str(reaction.mid)!,
        emoji: str(reaction.emoji) ?? str(reaction.reaction) ?? '',
        action: reaction.action === 'unreact' ? 'removed' : 'added',
        sender: party,
        conversation: { externalId: sender },
        occurredAt,
      },
    ];
  }
  return [];
}

function dedupeParts(item: Obj): string[] {
  const sender = str(obj(item.sender)?.id) ?? '';
  const m = obj(item.message);
  if (m) return [str(m.mid) ?? ''];
  const e = obj(item.message_edit);
  if (e) return [`edit.${str(e.mid)}.${str(e.num_edit)}`];
  const d = obj(item.delivery);
  if (d) return [`delivery.${sender}.${str(d.watermark)}.${(Array.isArray(d.mids) ? d.mids : []).join('.')}`];
  const r = obj(item.read);
  if (r) return [`read.${sender}.${str(r.watermark)}`];
  const x = obj(item.reaction);
  if (x) return [`reaction.${str(x.mid)}.${sender}.${str(x.action)}.${str(x.emoji) ?? str(x.reaction)}`];
  return [];
}

/**
 * Messenger and Instagram messaging webhooks share one shape (Meta's Graph API reference): a shared URL
 * routed by `entry[].id` (page / Instagram account), signed with the Meta app secret,
 * deduplicated on `mid`.
 */
export function metaMessagingInbound(platform: PlatformName): InboundHalf {
  return {
    verify: verifyHubSignature,
    handshake: hubChallenge,
    routingIds: entryIds,
    dedupeKey(req) {
      const body = parseJson(req.rawBody);
      if (!isObject(body) || !Array.isArray(body.entry)) return undefined;
      return dedupeOf(messaging(body).flatMap(dedupeParts).filter(Boolean).sort()) ?? bodyHash(req.rawBody);
    },
    normalise({ rawBody }) {
      return messaging(jsonObject(rawBody, platform)).flatMap(records);
    },
  };
}

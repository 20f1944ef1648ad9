import { bodyHash, dedupeOf, isObject, jsonObject, parseJson, str, unixToIso, type MessageType } from '../inbound-common.js';
import { entryIds, hubChallenge, verifyHubSignature } from '../meta-inbound.js';
import type { InboundHalf, InboundMedia, NormalisedRecord, PlatformParty } from '../types.js';

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined => (isObject(v) ? v : undefined);
const arr = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isObject) : []);

/** `value` objects of every `messages` change of every entry. */
function changeValues(body: Obj): Obj[] {
  return arr(body.entry).flatMap((e) =>
    arr(e.changes)
      .filter((c) => c.field === undefined || c.field === 'messages')
      .flatMap((c) => (obj(c.value) ? [obj(c.value)!] : [])),
  );
}

const STATUS = new Set(['sent', 'delivered', 'read', 'failed']);
const MEDIA_TYPES: Record<string, MessageType> = {
  image: 'image',
  video: 'video',
  document: 'document',
  sticker: 'sticker',
  audio: 'audio',
};

function mediaMessage(type: string, m: Obj): Extract<NormalisedRecord, { kind: 'message' }>['message'] {
  const part = obj(m[type]) ?? {};
  const isVoice = type === 'audio' && part.voice === true;
  const media: InboundMedia = {
    platformFileId: str(part.id),
    ...(str(part.mime_type) ? { mimeType: str(part.mime_type) } : {}),
    ...(str(part.filename) ? { filename: str(part.filename) } : {}),
    ...(type === 'audio' ? { isAudio: true } : {}),
  };
  const caption = str(part.caption);
  return { text: caption ?? '', type: isVoice ? 'voice' : MEDIA_TYPES[type], media, ...(caption !== undefined ? { caption } : {}) };
}

function messageBody(m: Obj): Extract<NormalisedRecord, { kind: 'message' }>['message'] {
  const type = str(m.type) ?? 'unknown';
  if (type === 'text') return { text: str(obj(m.text)?.body) ?? '', type: 'text' };
  if (MEDIA_TYPES[type]) return mediaMessage(type, m);
  if (type === 'location') {
    const l = obj(m.location) ?? {};
    return {
      text: '',
      type: 'location',
      location: { latitude: Number(l.latitude), longitude: Number(l.longitude), name: str(l.name), address: str(l.address) },
    };
  }
  if (type === 'contacts') return { text: '', type: 'contact', contact: { contacts: m.contacts } };
  // Quick-reply buttons and interactive list/button replies: the chosen title is what the user "said".
  if (type === 'button')
    return { text: str(obj(m.button)?.text) ?? '', type: 'text', extra: { button_payload: str(obj(m.button)?.payload) } };
  if (type === 'interactive') {
    const i = obj(m.interactive) ?? {};
    const reply = obj(i.button_reply) ?? obj(i.list_reply) ?? {};
    return { text: str(reply.title) ?? '', type: 'text', extra: { reply_id: str(reply.id) } };
  }
  return { text: '', type: 'other', extra: { whatsapp_type: type } };
}

function messageRecords(value: Obj): NormalisedRecord[] {
  const meta = obj(value.metadata) ?? {};
  const business: PlatformParty | undefined = str(meta.phone_number_id)
    ? { externalId: str(meta.phone_number_id)!, name: str(meta.display_phone_number) }
    : undefined;
  // contacts[] names the senders; some users have no phone (user_id instead of wa_id).
  const names = new Map<string, string>();
  for (const c of arr(value.contacts)) {
    const name = str(obj(c.profile)?.name);
    const id = str(c.wa_id) ?? str(c.user_id);
    if (id && name) names.set(id, name);
  }
  const out: NormalisedRecord[] = [];
  for (const m of arr(value.messages)) {
    const id = str(m.id);
    const from = str(m.from) ?? str(m.from_user_id);
    if (!id || !from) continue;
    const sender: PlatformParty = { externalId: from, ...(names.get(from) ? { name: names.get(from) } : {}) };
    const occurredAt = unixToIso(m.timestamp);
    if (m.type === 'reaction') {
      const r = obj(m.reaction) ?? {};
      const target = str(r.message_id);
      if (!target) continue;
      const emoji = str(r.emoji);
      // An absent (or empty) emoji means the user took the reaction back.
      out.push({
        kind: 'reaction',
        targetExternalMessageId: target,
        emoji: emoji ?? '',
        action: emoji ? 'added' : 'removed',
        sender,
        conversation: { externalId: from },
        occurredAt,
      });
      continue;
    }
    out.push({
      kind: 'message',
      externalMessageId: id,
      conversation: { externalId: from, ...(sender.name ? { name: sender.name } : {}) },
      sender,
      ...(business ? { recipient: business } : {}),
      message: messageBody(m),
      occurredAt,
    });
  }
  for (const s of arr(value.statuses)) {
    const id = str(s.id);
    const status = str(s.status);
    if (!id || !status || !STATUS.has(status)) continue;
    const err = arr(s.errors)[0];
    out.push({
      kind: 'status',
      externalMessageId: id,
      status: status as 'sent' | 'delivered' | 'read' | 'failed',
      ...(str(s.recipient_id) ? { recipient: { externalId: str(s.recipient_id)! } } : {}),
      ...(err ? { error: { code: err.code as number | undefined, message: str(err.title) ?? str(err.message) } } : {}),
      occurredAt: unixToIso(s.timestamp),
    });
  }
  return out;
}

/**
 * WhatsApp Cloud API webhooks (the platform's API reference): a shared URL routed by the business account
 * and phone number ids, signed with the Meta app secret, deduplicated on the message ids
 * (wamid) and, for statuses, on status + id.
 */
export const whatsappInbound: InboundHalf = {
  verify: verifyHubSignature,
  handshake: hubChallenge,
  routingIds(body) {
    const ids = new Set(entryIds(body));
    if (isObject(body))
      for (const v of changeValues(body)) {
        const pid = str(obj(v.metadata)?.phone_number_id);
        if (pid) ids.add(pid);
      }
    return [...ids];
  },
  dedupeKey(req) {
    const body = parseJson(req.rawBody);
    if (!isObject(body) || !Array.isArray(body.entry)) return undefined;
    const values = changeValues(body);
    const keys = [
      ...values.flatMap((v) => arr(v.messages).map((m) => str(m.id) ?? '')),
      ...values.flatMap((v) => arr(v.statuses).map((s) => `${str(s.status)}.${str(s.id)}`)),
    ].filter(Boolean);
    // A change with neither (errors only, other fields): its bytes identify it.
    return dedupeOf(keys.sort()) ?? bodyHash(req.rawBody);
  },
  normalise({ rawBody }) {
    return changeValues(jsonObject(rawBody, 'WHATSAPP')).flatMap(messageRecords);
  },
};

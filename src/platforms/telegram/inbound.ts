import {
  configString,
  dedupeOf,
  header,
  isObject,
  jsonObject,
  ok,
  parseJson,
  refuse,
  safeEqual,
  str,
  unixToIso,
  type MessageType,
} from '../inbound-common.js';
import type { InboundHalf, InboundMedia, NormalisedRecord, PlatformParty } from '../types.js';

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | undefined => (isObject(v) ? v : undefined);

/** A Telegram user or chat as a party: numeric id, "First Last" name, @username. */
function partyOf(u: Obj | undefined): PlatformParty | undefined {
  const id = str(u?.id);
  if (!u || !id) return undefined;
  const name = [str(u.first_name), str(u.last_name)].filter(Boolean).join(' ') || str(u.title);
  return { externalId: id, ...(name ? { name } : {}), ...(str(u.username) ? { username: str(u.username) } : {}) };
}

/** Telegram message ids are unique only inside a chat (the platform's API reference): the key is (chat.id, message_id). */
const telegramMessageId = (chatId: string, messageId: string) => `${chatId}:${messageId}`;

function mediaOf(m: Obj): { type: MessageType; media?: InboundMedia } {
  const file = (f: Obj | undefined, extra: Partial<InboundMedia> = {}): InboundMedia | undefined =>
    f && str(f.file_id)
      ? {
          platformFileId: str(f.file_id),
          ...(str(f.mime_type) ? { mimeType: str(f.mime_type) } : {}),
          ...(str(f.file_name) ? { filename: str(f.file_name) } : {}),
          ...(typeof f.duration === 'number' ? { durationSec: f.duration } : {}),
          ...extra,
        }
      : undefined;
  if (Array.isArray(m.photo) && m.photo.length) {
    // PhotoSize[] comes smallest first: keep the largest.
    return { type: 'image', media: file(obj(m.photo[m.photo.length - 1]), { mimeType: 'image/jpeg' }) };
  }
  if (m.voice) return { type: 'voice', media: file(obj(m.voice), { isAudio: true }) };
  if (m.audio) return { type: 'audio', media: file(obj(m.audio), { isAudio: true }) };
  if (m.video) return { type: 'video', media: file(obj(m.video)) };
  if (m.video_note) return { type: 'video', media: file(obj(m.video_note)) };
  // An animation also arrives as `document`; the animation field is the more precise one.
  if (m.animation) return { type: 'video', media: file(obj(m.animation)) };
  if (m.sticker) return { type: 'sticker', media: file(obj(m.sticker)) };
  if (m.document) return { type: 'document', media: file(obj(m.document)) };
  return { type: 'other' };
}

function messageRecord(m: Obj, edited: boolean): NormalisedRecord | undefined {
  const chat = obj(m.chat);
  const chatId = str(chat?.id);
  const messageId = str(m.message_id);
  if (!chat || !chatId || !messageId) return undefined;
  // Channel posts and anonymous admins have no `from`: the chat speaking is the sender.
  const sender = partyOf(obj(m.from)) ?? partyOf(obj(m.sender_chat)) ?? partyOf(chat)!;
  const caption = str(m.caption);
  let message: Extract<NormalisedRecord, { kind: 'message' }>['message'];
  if (typeof m.text === 'string') {
    message = { text: m.text, type: 'text' };
  } else if (obj(m.location)) {
    const loc = obj(m.location)!;
    message = { text: '', type: 'location', location: { latitude: Number(loc.latitude), longitude: Number(loc.longitude) } };
  } else if (obj(m.venue)) {
    const v = obj(m.venue)!;
    const loc = obj(v.location) ?? {};
    message = {
      text: '',
      type: 'location',
      location: { latitude: Number(loc.latitude), longitude: Number(loc.longitude), name: str(v.title), address: str(v.address) },
    };
  } else if (obj(m.contact)) {
    const c = obj(m.contact)!;
    const contact = Object.fromEntries(
      ['phone_number', 'first_name', 'last_name', 'user_id', 'vcard'].filter((k) => c[k] !== undefined).map((k) => [k, c[k]]),
    );
    message = { text: '', type: 'contact', contact };
  } else {
    const { type, media } = mediaOf(m);
    message = { text: caption ?? '', type, ...(media ? { media } : {}), ...(caption !== undefined ? { caption } : {}) };
  }
  const isGroup = str(chat.type) !== 'private';
  const threadId = m.is_topic_message && m.message_thread_id !== undefined ? str(m.message_thread_id) : undefined;
  return {
    kind: 'message',
    externalMessageId: telegramMessageId(chatId, messageId),
    conversation: {
      externalId: chatId,
      ...(isGroup && str(chat.title) ? { name: str(chat.title) } : {}),
      ...(threadId ? { threadId } : {}),
    },
    sender,
    message,
    ...(edited ? { edited: true } : {}),
    occurredAt: unixToIso(edited ? (m.edit_date ?? m.date) : m.date),
  };
}

/** Emoji of a ReactionType list; custom and paid reactions have no emoji and are left out. */
const emojis = (list: unknown): string[] =>
  Array.isArray(list) ? list.flatMap((r) => (isObject(r) && r.type === 'emoji' && typeof r.emoji === 'string' ? [r.emoji] : [])) : [];

/** `message_reaction` carries the whole old and new sets: the difference is what was added and removed. */
function reactionRecords(r: Obj): NormalisedRecord[] {
  const chat = obj(r.chat);
  const chatId = str(chat?.id);
  const messageId = str(r.message_id);
  const sender = partyOf(obj(r.user)) ?? partyOf(obj(r.actor_chat));
  if (!chatId || !messageId || !sender) return [];
  const before = emojis(r.old_reaction);
  const after = emojis(r.new_reaction);
  const base = {
    kind: 'reaction' as const,
    targetExternalMessageId: telegramMessageId(chatId, messageId),
    targetLocalId: messageId,
    sender,
    conversation: { externalId: chatId },
    occurredAt: unixToIso(r.date),
  };
  return [
    ...after.filter((e) => !before.includes(e)).map((emoji) => ({ ...base, emoji, action: 'added' as const })),
    ...before.filter((e) => !after.includes(e)).map((emoji) => ({ ...base, emoji, action: 'removed' as const })),
  ];
}

/**
 * Telegram Bot API updates (the platform's API reference): one update per delivery, deduplicated on
 * `update_id`. The client registers the webhook itself (docs/platforms.md); when it set a
 * `secret_token`, Telegram sends it back in `X-Telegram-Bot-Api-Secret-Token`.
 */
export const telegramInbound: InboundHalf = {
  verify(config, req) {
    const expected = configString(config, 'secret_token');
    if (!expected) return ok;
    const given = header(req, 'x-telegram-bot-api-secret-token');
    if (!given) return refuse('missing X-Telegram-Bot-Api-Secret-Token');
    return safeEqual(given, expected) ? ok : refuse('invalid secret token');
  },
  dedupeKey(req) {
    const body = parseJson(req.rawBody);
    const id = isObject(body) ? str(body.update_id) : undefined;
    return id ? dedupeOf([id]) : undefined;
  },
  normalise({ rawBody }) {
    const u = jsonObject(rawBody, 'TELEGRAM');
    const message = obj(u.message) ?? obj(u.channel_post);
    if (message) return [messageRecord(message, false)].filter((r): r is NormalisedRecord => !!r);
    const edited = obj(u.edited_message) ?? obj(u.edited_channel_post);
    if (edited) return [messageRecord(edited, true)].filter((r): r is NormalisedRecord => !!r);
    const reaction = obj(u.message_reaction);
    if (reaction) return reactionRecords(reaction);
    // Other update kinds (callback_query, my_chat_member…) are not messages: nothing to record.
    return [];
  },
};

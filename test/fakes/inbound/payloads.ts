/**
 * Webhook payloads in the shapes the platforms document, for unit and integration tests.
 * Each builder takes only what a test varies; everything else is a realistic constant.
 */

const NOW_S = () => Math.floor(Date.now() / 1000);

// ---------- Telegram ----------
export const tgUser = { id: 111222333, is_bot: false, first_name: 'Ann', last_name: 'Lee', username: 'annlee' };
export const tgChat = { id: 111222333, type: 'private', first_name: 'Ann', username: 'annlee' };

export function tgText(updateId: number, messageId: number, text: string, o: { from?: object; chat?: object } = {}) {
  return { update_id: updateId, message: { message_id: messageId, from: o.from ?? tgUser, chat: o.chat ?? tgChat, date: NOW_S(), text } };
}
export function tgVoice(updateId: number, messageId: number, fileId: string) {
  return {
    update_id: updateId,
    message: {
      message_id: messageId,
      from: tgUser,
      chat: tgChat,
      date: NOW_S(),
      voice: { file_id: fileId, file_unique_id: `u${fileId}`, duration: 3, mime_type: 'audio/ogg', file_size: 1200 },
    },
  };
}
export function tgPhoto(updateId: number, messageId: number, caption?: string) {
  return {
    update_id: updateId,
    message: {
      message_id: messageId,
      from: tgUser,
      chat: tgChat,
      date: NOW_S(),
      photo: [
        { file_id: 'photo-small', file_unique_id: 'ps', width: 90, height: 90, file_size: 1000 },
        { file_id: 'photo-large', file_unique_id: 'pl', width: 800, height: 800, file_size: 50000 },
      ],
      ...(caption ? { caption } : {}),
    },
  };
}
export function tgEdited(updateId: number, messageId: number, text: string) {
  return {
    update_id: updateId,
    edited_message: { message_id: messageId, from: tgUser, chat: tgChat, date: NOW_S() - 60, edit_date: NOW_S(), text },
  };
}
export function tgReaction(updateId: number, messageId: number, oldEmoji: string[], newEmoji: string[]) {
  return {
    update_id: updateId,
    message_reaction: {
      chat: tgChat,
      message_id: messageId,
      user: tgUser,
      date: NOW_S(),
      old_reaction: oldEmoji.map((emoji) => ({ type: 'emoji', emoji })),
      new_reaction: newEmoji.map((emoji) => ({ type: 'emoji', emoji })),
    },
  };
}

// ---------- WhatsApp ----------
export function waEnvelope(wabaId: string, phoneNumberId: string, value: object) {
  return {
    object: 'whatsapp_business_account',
    entry: [
      {
        id: wabaId,
        changes: [
          {
            field: 'messages',
            value: {
              messaging_product: 'whatsapp',
              metadata: { display_phone_number: '15550001111', phone_number_id: phoneNumberId },
              ...value,
            },
          },
        ],
      },
    ],
  };
}
const waContact = (waId: string, name = 'Bea') => ({ contacts: [{ profile: { name }, wa_id: waId }] });

export function waText(wabaId: string, phoneNumberId: string, from: string, wamid: string, body: string) {
  return waEnvelope(wabaId, phoneNumberId, {
    ...waContact(from),
    messages: [{ from, id: wamid, timestamp: String(NOW_S()), type: 'text', text: { body } }],
  });
}
export function waImage(wabaId: string, phoneNumberId: string, from: string, wamid: string, mediaId: string, caption?: string) {
  return waEnvelope(wabaId, phoneNumberId, {
    ...waContact(from),
    messages: [
      {
        from,
        id: wamid,
        timestamp: String(NOW_S()),
        type: 'image',
        image: { ...(caption ? { caption } : {}), mime_type: 'image/jpeg', sha256: 'abc', id: mediaId },
      },
    ],
  });
}
export function waAudio(wabaId: string, phoneNumberId: string, from: string, wamid: string, mediaId: string, voice = true) {
  return waEnvelope(wabaId, phoneNumberId, {
    ...waContact(from),
    messages: [
      {
        from,
        id: wamid,
        timestamp: String(NOW_S()),
        type: 'audio',
        audio: { mime_type: 'audio/ogg; codecs=opus', sha256: 'def', id: mediaId, voice },
      },
    ],
  });
}
export function waReaction(wabaId: string, phoneNumberId: string, from: string, wamid: string, target: string, emoji?: string) {
  return waEnvelope(wabaId, phoneNumberId, {
    ...waContact(from),
    messages: [
      {
        from,
        id: wamid,
        timestamp: String(NOW_S()),
        type: 'reaction',
        reaction: { message_id: target, ...(emoji !== undefined ? { emoji } : {}) },
      },
    ],
  });
}
export function waStatus(
  wabaId: string,
  phoneNumberId: string,
  wamid: string,
  status: string,
  recipient = '16505551234',
  errors?: object[],
) {
  return waEnvelope(wabaId, phoneNumberId, {
    statuses: [{ id: wamid, status, timestamp: String(NOW_S()), recipient_id: recipient, ...(errors ? { errors } : {}) }],
  });
}

// ---------- Messenger / Instagram ----------
export function fbEnvelope(object: 'page' | 'instagram', accountId: string, messaging: object[]) {
  return { object, entry: [{ id: accountId, time: Date.now(), messaging }] };
}
export function fbText(object: 'page' | 'instagram', accountId: string, psid: string, mid: string, text: string) {
  return fbEnvelope(object, accountId, [
    { sender: { id: psid }, recipient: { id: accountId }, timestamp: Date.now(), message: { mid, text } },
  ]);
}
export function fbAttachment(object: 'page' | 'instagram', accountId: string, psid: string, mid: string, type: string, url: string) {
  return fbEnvelope(object, accountId, [
    {
      sender: { id: psid },
      recipient: { id: accountId },
      timestamp: Date.now(),
      message: { mid, attachments: [{ type, payload: { url } }] },
    },
  ]);
}
export function fbEcho(object: 'page' | 'instagram', accountId: string, psid: string, mid: string) {
  return fbEnvelope(object, accountId, [
    { sender: { id: accountId }, recipient: { id: psid }, timestamp: Date.now(), message: { mid, text: 'ours', is_echo: true } },
  ]);
}
export function fbDelivery(object: 'page' | 'instagram', accountId: string, psid: string, watermark: number, mids?: string[]) {
  return fbEnvelope(object, accountId, [
    { sender: { id: psid }, recipient: { id: accountId }, timestamp: Date.now(), delivery: { ...(mids ? { mids } : {}), watermark } },
  ]);
}
export function fbRead(object: 'page' | 'instagram', accountId: string, psid: string, watermark: number) {
  return fbEnvelope(object, accountId, [
    { sender: { id: psid }, recipient: { id: accountId }, timestamp: Date.now(), read: { watermark } },
  ]);
}
export function fbReaction(
  object: 'page' | 'instagram',
  accountId: string,
  psid: string,
  mid: string,
  action: 'react' | 'unreact',
  emoji = '❤',
) {
  return fbEnvelope(object, accountId, [
    { sender: { id: psid }, recipient: { id: accountId }, timestamp: Date.now(), reaction: { reaction: 'love', emoji, action, mid } },
  ]);
}
export function fbEdit(object: 'page' | 'instagram', accountId: string, psid: string, mid: string, text: string, numEdit = 1) {
  return fbEnvelope(object, accountId, [
    { sender: { id: psid }, recipient: { id: accountId }, timestamp: Date.now(), message_edit: { mid, text, num_edit: numEdit } },
  ]);
}

// ---------- Slack ----------
export function slackEvent(eventId: string, event: object, team = 'T0001') {
  return { token: 'legacy', team_id: team, api_app_id: 'A0001', event, type: 'event_callback', event_id: eventId, event_time: NOW_S() };
}
export const slackMessage = (eventId: string, channel: string, user: string, ts: string, text: string, extra: object = {}) =>
  slackEvent(eventId, { type: 'message', channel, user, text, ts, event_ts: ts, channel_type: 'channel', ...extra });
export const slackReaction = (eventId: string, channel: string, user: string, ts: string, reaction: string, added = true) =>
  slackEvent(eventId, {
    type: added ? 'reaction_added' : 'reaction_removed',
    user,
    reaction,
    item: { type: 'message', channel, ts },
    event_ts: `${NOW_S()}.000200`,
  });
export const slackEdit = (eventId: string, channel: string, user: string, ts: string, text: string) =>
  slackEvent(eventId, {
    type: 'message',
    subtype: 'message_changed',
    channel,
    hidden: true,
    ts: `${NOW_S()}.000300`,
    event_ts: `${NOW_S()}.000300`,
    message: { type: 'message', user, text, ts, edited: { user, ts: `${NOW_S()}.000000` } },
    previous_message: { type: 'message', user, text: 'before', ts },
  });

// ---------- Discord ----------
export function discordCommand(id: string, channelId: string, userId: string, name: string, options: object[] = [], resolved?: object) {
  return {
    id,
    application_id: '900000000000000001',
    type: 2,
    data: { id: '910000000000000001', name, type: 1, options, ...(resolved ? { resolved } : {}) },
    guild_id: '920000000000000001',
    channel_id: channelId,
    channel: { id: channelId, name: 'general', type: 0 },
    member: { user: { id: userId, username: 'dora', global_name: 'Dora' }, nick: null, roles: [] },
    token: 'interaction-token',
    version: 1,
  };
}
export const discordComponent = (id: string, channelId: string, userId: string, customId: string, values?: string[]) => ({
  id,
  application_id: '900000000000000001',
  type: 3,
  data: { custom_id: customId, component_type: values ? 3 : 2, ...(values ? { values } : {}) },
  channel_id: channelId,
  user: { id: userId, username: 'dora' },
  message: { id: '930000000000000001' },
  token: 'interaction-token',
  version: 1,
});

// ---------- Twilio ----------
export const twilioInbound = (sid: string, from: string, to: string, body: string, media: { url: string; type: string }[] = []) => ({
  ToCountry: 'US',
  SmsMessageSid: sid,
  NumMedia: String(media.length),
  SmsSid: sid,
  SmsStatus: 'received',
  Body: body,
  To: to,
  NumSegments: '1',
  MessageSid: sid,
  AccountSid: 'AC00000000000000000000000000000000',
  From: from,
  ApiVersion: '2010-04-01',
  ...Object.fromEntries(
    media.flatMap((m, i) => [
      [`MediaUrl${i}`, m.url],
      [`MediaContentType${i}`, m.type],
    ]),
  ),
});
export const twilioStatus = (sid: string, to: string, status: string, errorCode?: string) => ({
  MessageSid: sid,
  SmsSid: sid,
  AccountSid: 'AC00000000000000000000000000000000',
  From: '+15550001111',
  To: to,
  MessageStatus: status,
  SmsStatus: status,
  ApiVersion: '2010-04-01',
  ...(errorCode ? { ErrorCode: errorCode } : {}),
});

// ---------- E-mail (our documented format) ----------
export const email = (messageId: string, from: string, text: string, extra: object = {}) => ({
  message_id: messageId,
  from: { address: from, name: 'Eve Example' },
  to: [{ address: 'support@example.com' }],
  subject: 'Order question',
  text,
  date: new Date().toUTCString(),
  ...extra,
});

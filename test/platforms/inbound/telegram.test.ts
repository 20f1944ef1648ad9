import { describe, expect, it } from 'vitest';
import { telegramInbound as tg } from '../../../src/platforms/telegram/inbound.js';
import { tgEdited, tgPhoto, tgReaction, tgText, tgVoice, tgUser } from '../../fakes/inbound/payloads.js';
import { inboundReq } from '../../fakes/inbound/request.js';
import { telegramHeaders } from '../../fakes/inbound/signers.js';

const norm = (body: unknown) => tg.normalise(inboundReq(body));

describe('telegram inbound verification', () => {
  it('accepts any update when the connection has no secret token', () => {
    expect(tg.verify({ bot_token: '1:a' }, inboundReq(tgText(1, 1, 'hi'))).ok).toBe(true);
  });

  it('requires X-Telegram-Bot-Api-Secret-Token to match the configured secret_token', () => {
    const config = { bot_token: '1:a', secret_token: 'sec_ret-1' };
    expect(tg.verify(config, inboundReq(tgText(1, 1, 'hi'), telegramHeaders('sec_ret-1'))).ok).toBe(true);
    expect(tg.verify(config, inboundReq(tgText(1, 1, 'hi'), telegramHeaders('wrong')))).toEqual({
      ok: false,
      reason: 'invalid secret token',
    });
    expect(tg.verify(config, inboundReq(tgText(1, 1, 'hi'))).ok).toBe(false);
  });
});

describe('telegram dedupe key', () => {
  it('is the update_id, and undefined for a body that is not an update', () => {
    expect(tg.dedupeKey(inboundReq(tgText(987, 1, 'x')))).toBe('987');
    expect(tg.dedupeKey(inboundReq({ hello: 1 }))).toBeUndefined();
    expect(tg.dedupeKey(inboundReq('not json'))).toBeUndefined();
  });
});

describe('telegram normaliser', () => {
  it('turns a text message into a record keyed on (chat id, message id)', () => {
    const [r] = norm(tgText(1, 42, 'hello'));
    expect(r).toMatchObject({
      kind: 'message',
      externalMessageId: `${tgUser.id}:42`,
      conversation: { externalId: String(tgUser.id) },
      sender: { externalId: String(tgUser.id), name: 'Ann Lee', username: 'annlee' },
      message: { text: 'hello', type: 'text' },
    });
    expect(r.kind === 'message' && r.edited).toBeFalsy();
  });

  it('names group conversations by title and uses negative chat ids as they come', () => {
    const [r] = norm(tgText(1, 5, 'hey all', { chat: { id: -100123, type: 'supergroup', title: 'Team' } }));
    expect(r).toMatchObject({ conversation: { externalId: '-100123', name: 'Team' }, externalMessageId: '-100123:5' });
  });

  it('keeps the largest photo size and the caption', () => {
    const [r] = norm(tgPhoto(1, 6, 'look'));
    expect(r).toMatchObject({ message: { type: 'image', text: 'look', caption: 'look', media: { platformFileId: 'photo-large' } } });
  });

  it('marks voice messages as audio for transcription', () => {
    const [r] = norm(tgVoice(1, 7, 'voice-1'));
    expect(r).toMatchObject({
      message: { type: 'voice', text: '', media: { platformFileId: 'voice-1', mimeType: 'audio/ogg', isAudio: true, durationSec: 3 } },
    });
  });

  it('reads audio, documents, stickers, locations and contacts', () => {
    const base = { message_id: 8, from: tgUser, chat: { id: 1, type: 'private' }, date: 1700000000 };
    const kinds = [
      [
        { audio: { file_id: 'a', file_unique_id: 'a', duration: 60, mime_type: 'audio/mpeg' } },
        { type: 'audio', media: { platformFileId: 'a', isAudio: true } },
      ],
      [
        { document: { file_id: 'd', file_unique_id: 'd', file_name: 'x.pdf', mime_type: 'application/pdf' } },
        { type: 'document', media: { platformFileId: 'd', filename: 'x.pdf' } },
      ],
      [
        { sticker: { file_id: 's', file_unique_id: 's', width: 1, height: 1, is_animated: false, is_video: false, type: 'regular' } },
        { type: 'sticker', media: { platformFileId: 's' } },
      ],
      [{ location: { latitude: 52.5, longitude: 13.4 } }, { type: 'location', location: { latitude: 52.5, longitude: 13.4 } }],
      [
        { contact: { phone_number: '+4912345', first_name: 'Carl', user_id: 77 } },
        { type: 'contact', contact: { phone_number: '+4912345', first_name: 'Carl', user_id: 77 } },
      ],
    ] as const;
    for (const [extra, expected] of kinds) {
      const [r] = norm({ update_id: 1, message: { ...base, ...extra } });
      expect(r).toMatchObject({ kind: 'message', message: expected });
    }
  });

  it('records an edit under the same external id with the edit time', () => {
    const body = tgEdited(2, 42, 'hello, corrected');
    const [r] = norm(body);
    expect(r).toMatchObject({ kind: 'message', externalMessageId: `${tgUser.id}:42`, edited: true, message: { text: 'hello, corrected' } });
    expect(r.occurredAt).toBe(new Date(body.edited_message.edit_date * 1000).toISOString());
  });

  it('turns reaction sets into added and removed reactions', () => {
    expect(norm(tgReaction(3, 42, [], ['👍']))).toEqual([
      expect.objectContaining({
        kind: 'reaction',
        targetExternalMessageId: `${tgUser.id}:42`,
        targetLocalId: '42',
        emoji: '👍',
        action: 'added',
        sender: expect.objectContaining({ externalId: String(tgUser.id) }),
      }),
    ]);
    expect(norm(tgReaction(4, 42, ['👍'], []))).toEqual([expect.objectContaining({ emoji: '👍', action: 'removed' })]);
    expect(norm(tgReaction(5, 42, ['👍'], ['🔥'])).map((r) => r.kind === 'reaction' && [r.emoji, r.action])).toEqual([
      ['🔥', 'added'],
      ['👍', 'removed'],
    ]);
  });

  it('records nothing for update kinds that are not messages, and throws on a non-object body', () => {
    expect(norm({ update_id: 9, my_chat_member: {} })).toEqual([]);
    expect(() => norm('[1,2]')).toThrow();
  });
});

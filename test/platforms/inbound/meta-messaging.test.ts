import { describe, expect, it } from 'vitest';
import { instagramInbound } from '../../../src/platforms/instagram/inbound.js';
import { messengerInbound } from '../../../src/platforms/messenger/inbound.js';
import { fbAttachment, fbDelivery, fbEcho, fbEdit, fbReaction, fbRead, fbText } from '../../fakes/inbound/payloads.js';
import { inboundReq } from '../../fakes/inbound/request.js';
import { metaHeaders } from '../../fakes/inbound/signers.js';

describe.each([
  ['messenger', messengerInbound, 'page'],
  ['instagram', instagramInbound, 'instagram'],
] as const)('%s inbound', (_name, adapter, object) => {
  const norm = (body: unknown) => adapter.normalise(inboundReq(body));
  const config = { page_access_token: 't', page_id: 'ACC1', ig_account_id: 'ACC1', app_secret: 's3cret', verify_token: 'vt' };

  it('verifies the Meta signature and answers the hub challenge', () => {
    const body = JSON.stringify(fbText(object, 'ACC1', 'PSID1', 'm_1', 'hi'));
    expect(adapter.verify(config, inboundReq(body, metaHeaders('s3cret', body))).ok).toBe(true);
    expect(adapter.verify(config, inboundReq(body, metaHeaders('nope', body))).ok).toBe(false);
    const q = { 'hub.mode': 'subscribe', 'hub.verify_token': 'vt', 'hub.challenge': 'abc' };
    expect(adapter.handshake!(config, inboundReq('', {}, { method: 'GET', query: q }))?.body).toBe('abc');
  });

  it('routes by entry id and dedupes on mid', () => {
    expect(adapter.routingIds!(fbText(object, 'ACC1', 'PSID1', 'm_1', 'hi'))).toEqual(['ACC1']);
    expect(adapter.dedupeKey(inboundReq(fbText(object, 'ACC1', 'PSID1', 'm_1', 'hi')))).toBe('m_1');
    expect(adapter.dedupeKey(inboundReq(fbReaction(object, 'ACC1', 'PSID1', 'm_1', 'react')))).not.toBe(
      adapter.dedupeKey(inboundReq(fbReaction(object, 'ACC1', 'PSID1', 'm_1', 'unreact'))),
    );
    expect(adapter.dedupeKey(inboundReq({}))).toBeUndefined();
  });

  it('reads text messages from the user to the account', () => {
    expect(norm(fbText(object, 'ACC1', 'PSID1', 'm_1', 'hello'))).toEqual([
      {
        kind: 'message',
        externalMessageId: 'm_1',
        conversation: { externalId: 'PSID1' },
        sender: { externalId: 'PSID1' },
        recipient: { externalId: 'ACC1' },
        message: { text: 'hello', type: 'text' },
        occurredAt: expect.any(String),
      },
    ]);
  });

  it('reads image, audio, video and file attachments by URL', () => {
    const cases = [
      ['image', { type: 'image' }],
      ['audio', { type: 'audio', media: { isAudio: true } }],
      ['video', { type: 'video' }],
      ['file', { type: 'document' }],
    ] as const;
    for (const [type, expected] of cases) {
      expect(norm(fbAttachment(object, 'ACC1', 'PSID1', `m_${type}`, type, `https://cdn.example/${type}`))[0]).toMatchObject({
        message: { ...expected, media: { url: `https://cdn.example/${type}` } },
      });
    }
  });

  it('skips echoes of our own messages', () => {
    expect(norm(fbEcho(object, 'ACC1', 'PSID1', 'm_echo'))).toEqual([]);
  });

  it('reads delivery mids as statuses and watermarks as watermark records', () => {
    const wm = Date.UTC(2024, 0, 1);
    expect(norm(fbDelivery(object, 'ACC1', 'PSID1', wm, ['m_a']))).toEqual([
      expect.objectContaining({ kind: 'status', externalMessageId: 'm_a', status: 'delivered' }),
      expect.objectContaining({
        kind: 'watermark',
        status: 'delivered',
        recipient: { externalId: 'PSID1' },
        upTo: '2024-01-01T00:00:00.000Z',
      }),
    ]);
    expect(norm(fbRead(object, 'ACC1', 'PSID1', wm))).toEqual([
      expect.objectContaining({ kind: 'watermark', status: 'read', upTo: '2024-01-01T00:00:00.000Z' }),
    ]);
  });

  it('reads reactions and their removal', () => {
    expect(norm(fbReaction(object, 'ACC1', 'PSID1', 'm_1', 'react'))).toEqual([
      expect.objectContaining({ kind: 'reaction', targetExternalMessageId: 'm_1', emoji: '❤', action: 'added' }),
    ]);
    expect(norm(fbReaction(object, 'ACC1', 'PSID1', 'm_1', 'unreact'))).toEqual([expect.objectContaining({ action: 'removed' })]);
  });

  it('reads edits under the same mid', () => {
    expect(norm(fbEdit(object, 'ACC1', 'PSID1', 'm_1', 'fixed'))).toEqual([
      expect.objectContaining({ kind: 'message', externalMessageId: 'm_1', edited: true, message: { text: 'fixed', type: 'text' } }),
    ]);
  });
});

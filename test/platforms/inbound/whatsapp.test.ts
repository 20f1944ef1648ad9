import { describe, expect, it } from 'vitest';
import { whatsappInbound as wa } from '../../../src/platforms/whatsapp/inbound.js';
import { waAudio, waEnvelope, waImage, waReaction, waStatus, waText } from '../../fakes/inbound/payloads.js';
import { inboundReq } from '../../fakes/inbound/request.js';
import { metaHeaders } from '../../fakes/inbound/signers.js';

const config = {
  access_token: 't',
  phone_number_id: 'PN1',
  business_account_id: 'WABA1',
  app_secret: 'app-secret-1',
  verify_token: 'vt-1',
};
const norm = (body: unknown) => wa.normalise(inboundReq(body));

describe('whatsapp (Meta) verification', () => {
  it('checks X-Hub-Signature-256 over the raw bytes with the app secret', () => {
    const body = JSON.stringify(waText('WABA1', 'PN1', '16505551234', 'wamid.A', 'hi'));
    expect(wa.verify(config, inboundReq(body, metaHeaders('app-secret-1', body))).ok).toBe(true);
    expect(wa.verify(config, inboundReq(body, metaHeaders('other-secret', body)))).toEqual({ ok: false, reason: 'invalid signature' });
    // Same JSON, different bytes: the signature is over the bytes as sent.
    const reformatted = JSON.stringify(JSON.parse(body), null, 2);
    expect(wa.verify(config, inboundReq(reformatted, metaHeaders('app-secret-1', body))).ok).toBe(false);
    expect(wa.verify(config, inboundReq(body)).ok).toBe(false);
    expect(wa.verify({ ...config, app_secret: undefined }, inboundReq(body, metaHeaders('app-secret-1', body))).ok).toBe(false);
  });

  it('answers the hub challenge as text only for the matching verify token', () => {
    const get = (query: Record<string, string>) => wa.handshake!(config, inboundReq('', {}, { method: 'GET', query }));
    expect(get({ 'hub.mode': 'subscribe', 'hub.verify_token': 'vt-1', 'hub.challenge': '1158201444' })).toEqual({
      status: 200,
      contentType: 'text/plain',
      body: '1158201444',
    });
    expect(get({ 'hub.mode': 'subscribe', 'hub.verify_token': 'nope', 'hub.challenge': '1' })).toEqual({
      status: 403,
      contentType: 'application/json',
      body: JSON.stringify({ error: { code: 'FORBIDDEN', message: 'hub.verify_token does not match' } }),
    });
    expect(get({ 'hub.mode': 'unsubscribe', 'hub.verify_token': 'vt-1', 'hub.challenge': '1' })?.status).toBe(403);
    expect(wa.handshake!(config, inboundReq('{}'))).toBeUndefined();
  });
});

describe('whatsapp routing and dedupe', () => {
  it('routes by entry id and metadata.phone_number_id', () => {
    expect(wa.routingIds!(waText('WABA1', 'PN1', '1', 'wamid.A', 'x')).sort()).toEqual(['PN1', 'WABA1']);
    expect(wa.routingIds!({ nope: true })).toEqual([]);
  });

  it('keys messages on wamid and statuses on status + id', () => {
    expect(wa.dedupeKey(inboundReq(waText('W', 'P', '1', 'wamid.A', 'x')))).toBe('wamid.A');
    expect(wa.dedupeKey(inboundReq(waStatus('W', 'P', 'wamid.B', 'read')))).toBe('read.wamid.B');
    expect(wa.dedupeKey(inboundReq(waStatus('W', 'P', 'wamid.B', 'delivered')))).not.toBe(
      wa.dedupeKey(inboundReq(waStatus('W', 'P', 'wamid.B', 'read'))),
    );
    expect(wa.dedupeKey(inboundReq({ object: 'x' }))).toBeUndefined();
  });
});

describe('whatsapp normaliser', () => {
  it('reads a text message with the contact name and the business number as recipient', () => {
    expect(norm(waText('WABA1', 'PN1', '16505551234', 'wamid.A', 'hello'))).toEqual([
      {
        kind: 'message',
        externalMessageId: 'wamid.A',
        conversation: { externalId: '16505551234', name: 'Bea' },
        sender: { externalId: '16505551234', name: 'Bea' },
        recipient: { externalId: 'PN1', name: '15550001111' },
        message: { text: 'hello', type: 'text' },
        occurredAt: expect.any(String),
      },
    ]);
  });

  it('reads image (with caption) and voice/audio media ids', () => {
    expect(norm(waImage('W', 'P', '1', 'wamid.I', 'media-1', 'see this'))[0]).toMatchObject({
      message: { type: 'image', text: 'see this', caption: 'see this', media: { platformFileId: 'media-1', mimeType: 'image/jpeg' } },
    });
    expect(norm(waAudio('W', 'P', '1', 'wamid.V', 'media-2'))[0]).toMatchObject({
      message: { type: 'voice', media: { platformFileId: 'media-2', isAudio: true } },
    });
    expect(norm(waAudio('W', 'P', '1', 'wamid.U', 'media-3', false))[0]).toMatchObject({
      message: { type: 'audio', media: { isAudio: true } },
    });
  });

  it('keeps location and contacts data', () => {
    const loc = waEnvelope('W', 'P', {
      messages: [
        {
          from: '1',
          id: 'wamid.L',
          timestamp: '1700000000',
          type: 'location',
          location: { latitude: 1.5, longitude: 2.5, name: 'Cafe', address: 'Main St' },
        },
      ],
    });
    expect(norm(loc)[0]).toMatchObject({
      message: { type: 'location', location: { latitude: 1.5, longitude: 2.5, name: 'Cafe', address: 'Main St' } },
      occurredAt: '2023-11-14T22:13:20.000Z',
    });
    const contacts = [{ name: { formatted_name: 'Carl' }, phones: [{ phone: '+1 555' }] }];
    const c = waEnvelope('W', 'P', { messages: [{ from: '1', id: 'wamid.C', timestamp: '1700000000', type: 'contacts', contacts }] });
    expect(norm(c)[0]).toMatchObject({ message: { type: 'contact', contact: { contacts } } });
  });

  it('reads reactions; an absent emoji is a removal', () => {
    expect(norm(waReaction('W', 'P', '1', 'wamid.R', 'wamid.T', '😀'))).toEqual([
      expect.objectContaining({
        kind: 'reaction',
        targetExternalMessageId: 'wamid.T',
        emoji: '😀',
        action: 'added',
        sender: { externalId: '1', name: 'Bea' },
      }),
    ]);
    expect(norm(waReaction('W', 'P', '1', 'wamid.R2', 'wamid.T'))).toEqual([expect.objectContaining({ action: 'removed' })]);
  });

  it('reads statuses, with errors, and skips statuses we do not report', () => {
    expect(norm(waStatus('W', 'P', 'wamid.S', 'delivered'))).toEqual([
      {
        kind: 'status',
        externalMessageId: 'wamid.S',
        status: 'delivered',
        recipient: { externalId: '16505551234' },
        occurredAt: expect.any(String),
      },
    ]);
    expect(norm(waStatus('W', 'P', 'wamid.S', 'failed', '1', [{ code: 131026, title: 'Message undeliverable' }]))[0]).toMatchObject({
      status: 'failed',
      error: { code: 131026, message: 'Message undeliverable' },
    });
    expect(norm(waStatus('W', 'P', 'wamid.S', 'deleted'))).toEqual([]);
  });

  it('accepts a user without a phone number (from_user_id, contacts[].user_id)', () => {
    const body = waEnvelope('W', 'P', {
      contacts: [{ profile: { name: 'NoPhone' }, user_id: 'US.123' }],
      messages: [{ from_user_id: 'US.123', id: 'wamid.N', timestamp: '1700000000', type: 'text', text: { body: 'hi' } }],
    });
    expect(norm(body)[0]).toMatchObject({ sender: { externalId: 'US.123', name: 'NoPhone' } });
  });
});

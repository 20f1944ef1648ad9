import { describe, expect, it } from 'vitest';
import { slackInbound as slack } from '../../../src/platforms/slack/inbound.js';
import { slackEdit, slackEvent, slackMessage, slackReaction } from '../../fakes/inbound/payloads.js';
import { inboundReq } from '../../fakes/inbound/request.js';
import { slackHeaders } from '../../fakes/inbound/signers.js';

const config = { bot_token: 'xoxb-1', signing_secret: '8f742231b10e8888abcd99yyyzzz85a5' };
const norm = (body: unknown) => slack.normalise(inboundReq(body));

describe('slack verification', () => {
  const body = JSON.stringify(slackMessage('Ev1', 'C1', 'U1', '1700000000.000100', 'hi'));

  it('accepts a v0 signature inside the five-minute window', () => {
    const now = Date.now();
    const ts = Math.floor(now / 1000) - 299;
    expect(slack.verify(config, inboundReq(body, slackHeaders(config.signing_secret, body, ts), { now })).ok).toBe(true);
  });

  it('refuses a correct signature whose timestamp is more than five minutes off', () => {
    const now = Date.now();
    const old = Math.floor(now / 1000) - 301;
    expect(slack.verify(config, inboundReq(body, slackHeaders(config.signing_secret, body, old), { now }))).toEqual({
      ok: false,
      reason: 'request timestamp outside the five-minute window',
    });
    const future = Math.floor(now / 1000) + 301;
    expect(slack.verify(config, inboundReq(body, slackHeaders(config.signing_secret, body, future), { now })).ok).toBe(false);
  });

  it('refuses a wrong secret, a changed body and missing headers', () => {
    expect(slack.verify(config, inboundReq(body, slackHeaders('another-secret', body))).ok).toBe(false);
    expect(slack.verify(config, inboundReq(`${body} `, slackHeaders(config.signing_secret, body))).ok).toBe(false);
    expect(slack.verify(config, inboundReq(body)).ok).toBe(false);
  });
});

describe('slack handshake and dedupe', () => {
  it('answers url_verification with the challenge', () => {
    const body = { token: 'x', challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P', type: 'url_verification' };
    expect(slack.handshake!(config, inboundReq(body))).toEqual({ status: 200, contentType: 'text/plain', body: body.challenge });
    expect(slack.handshake!(config, inboundReq(slackMessage('Ev1', 'C1', 'U1', '1.1', 'x')))).toBeUndefined();
  });

  it('keys on event_id', () => {
    expect(slack.dedupeKey(inboundReq(slackMessage('Ev0123', 'C1', 'U1', '1.1', 'x')))).toBe('Ev0123');
    expect(slack.dedupeKey(inboundReq({ type: 'event_callback' }))).toBeUndefined();
  });
});

describe('slack normaliser', () => {
  it('identifies a message by (channel, ts)', () => {
    expect(norm(slackMessage('Ev1', 'C1', 'U1', '1700000000.000100', 'hello'))).toEqual([
      {
        kind: 'message',
        externalMessageId: 'C1:1700000000.000100',
        conversation: { externalId: 'C1' },
        sender: { externalId: 'U1' },
        message: { text: 'hello', type: 'text' },
        occurredAt: '2023-11-14T22:13:20.000Z',
      },
    ]);
  });

  it('puts thread replies in the thread conversation', () => {
    expect(norm(slackMessage('Ev1', 'C1', 'U1', '1700000001.000100', 'reply', { thread_ts: '1700000000.000100' }))[0]).toMatchObject({
      conversation: { externalId: 'C1', threadId: '1700000000.000100' },
    });
  });

  it('reads shared files as media with their type', () => {
    const files = [{ id: 'F1', name: 'clip.m4a', mimetype: 'audio/mp4', url_private_download: 'https://files.slack.com/F1/download' }];
    expect(norm(slackMessage('Ev1', 'C1', 'U1', '1.2', '', { subtype: 'file_share', files }))[0]).toMatchObject({
      message: {
        type: 'audio',
        media: { url: 'https://files.slack.com/F1/download', platformFileId: 'F1', mimeType: 'audio/mp4', isAudio: true },
      },
    });
  });

  it('reads message_changed as an edit of the original ts', () => {
    expect(norm(slackEdit('Ev2', 'C1', 'U1', '1700000000.000100', 'fixed'))[0]).toMatchObject({
      externalMessageId: 'C1:1700000000.000100',
      edited: true,
      message: { text: 'fixed' },
    });
  });

  it('reads reactions added and removed', () => {
    expect(norm(slackReaction('Ev3', 'C1', 'U2', '1700000000.000100', 'thumbsup'))).toEqual([
      expect.objectContaining({
        kind: 'reaction',
        targetExternalMessageId: 'C1:1700000000.000100',
        targetLocalId: '1700000000.000100',
        emoji: 'thumbsup',
        action: 'added',
        sender: { externalId: 'U2' },
      }),
    ]);
    expect(norm(slackReaction('Ev4', 'C1', 'U2', '1.1', 'thumbsup', false))[0]).toMatchObject({ action: 'removed' });
  });

  it('skips bot posts, joins and deletions', () => {
    expect(norm(slackMessage('Ev5', 'C1', 'U1', '1.1', 'ours', { bot_id: 'B1' }))).toEqual([]);
    expect(norm(slackMessage('Ev6', 'C1', 'U1', '1.1', 'joined', { subtype: 'channel_join' }))).toEqual([]);
    expect(norm(slackEvent('Ev7', { type: 'message', subtype: 'message_deleted', channel: 'C1', deleted_ts: '1.1' }))).toEqual([]);
  });
});

import { describe, expect, it } from 'vitest';
import { discordInbound as discord } from '../../../src/platforms/discord/inbound.js';
import { discordCommand, discordComponent } from '../../fakes/inbound/payloads.js';
import { inboundReq } from '../../fakes/inbound/request.js';
import { discordHeaders, discordKeys } from '../../fakes/inbound/signers.js';

const keys = discordKeys();
const config = { bot_token: 'b', application_id: '900000000000000001', public_key: keys.publicKeyHex };
const norm = (body: unknown) => discord.normalise(inboundReq(body));

describe('discord verification (Ed25519 over timestamp + body)', () => {
  const body = JSON.stringify({ type: 1 });

  it('accepts a signature made with the application key', () => {
    expect(discord.verify(config, inboundReq(body, discordHeaders(keys.privateKey, body))).ok).toBe(true);
  });

  it('refuses another key, another timestamp, a changed body and missing headers', () => {
    const other = discordKeys();
    expect(discord.verify(config, inboundReq(body, discordHeaders(other.privateKey, body))).ok).toBe(false);
    // Inside the replay window, so only the signature can refuse the changed timestamp.
    const now = Math.floor(Date.now() / 1000);
    const h = discordHeaders(keys.privateKey, body, String(now));
    expect(discord.verify(config, inboundReq(body, { ...h, 'X-Signature-Timestamp': String(now + 1) }))).toEqual({
      ok: false,
      reason: 'invalid signature',
    });
    expect(discord.verify(config, inboundReq('{"type":2}', discordHeaders(keys.privateKey, body))).ok).toBe(false);
    expect(discord.verify(config, inboundReq(body, { 'X-Signature-Ed25519': 'zz' })).ok).toBe(false);
    expect(discord.verify({ ...config, public_key: 'not-hex' }, inboundReq(body, discordHeaders(keys.privateKey, body)))).toEqual({
      ok: false,
      reason: 'connection public_key is not a 32-byte hex key',
    });
  });
});

describe('discord handshake, dedupe and acknowledgement', () => {
  it('answers PING with PONG', () => {
    expect(discord.handshake!(config, inboundReq({ id: '1', type: 1 }))).toEqual({
      status: 200,
      contentType: 'application/json',
      body: '{"type":1}',
    });
    expect(discord.handshake!(config, inboundReq(discordCommand('2', 'C', 'U', 'ask')))).toBeUndefined();
  });

  it('keys on the interaction id', () => {
    expect(discord.dedupeKey(inboundReq(discordCommand('123', 'C', 'U', 'ask')))).toBe('123');
  });

  it('defers commands with a "thinking" response and components silently', () => {
    expect(JSON.parse(discord.acknowledge!(inboundReq(discordCommand('1', 'C', 'U', 'ask'))).body)).toEqual({ type: 5 });
    expect(JSON.parse(discord.acknowledge!(inboundReq(discordComponent('1', 'C', 'U', 'btn'))).body)).toEqual({ type: 6 });
  });
});

describe('discord normaliser', () => {
  it('reads a slash command as the text a user would type, in its channel', () => {
    const body = discordCommand('1175000000000000000', 'CH1', 'U1', 'ask', [{ name: 'question', type: 3, value: 'where is my order?' }]);
    const [r] = norm(body);
    expect(r).toMatchObject({
      kind: 'message',
      externalMessageId: '1175000000000000000',
      conversation: { externalId: 'CH1', name: 'general' },
      sender: { externalId: 'U1', name: 'Dora', username: 'dora' },
      message: { text: '/ask question:where is my order?', type: 'text', extra: { interaction: 'application_command', command: 'ask' } },
    });
    // Snowflake time: (id >> 22) + Discord epoch.
    expect(r.occurredAt).toBe(new Date(Number(1175000000000000000n >> 22n) + 1420070400000).toISOString());
  });

  it('reads an attachment option as media', () => {
    const resolved = {
      attachments: {
        '55': {
          id: '55',
          filename: 'note.ogg',
          content_type: 'audio/ogg',
          size: 100,
          url: 'https://cdn.discordapp.com/a/55/note.ogg',
          proxy_url: 'x',
        },
      },
    };
    const [r] = norm(discordCommand('2', 'CH1', 'U1', 'voice', [{ name: 'file', type: 11, value: '55' }], resolved));
    expect(r).toMatchObject({
      message: {
        type: 'audio',
        text: '/voice',
        media: { url: 'https://cdn.discordapp.com/a/55/note.ogg', mimeType: 'audio/ogg', isAudio: true },
      },
    });
  });

  it('reads component values', () => {
    expect(norm(discordComponent('3', 'CH1', 'U1', 'menu', ['a', 'b']))[0]).toMatchObject({
      message: { text: 'a, b', extra: { custom_id: 'menu', values: ['a', 'b'] } },
    });
  });

  it('records nothing for PING', () => {
    expect(norm({ id: '4', type: 1 })).toEqual([]);
  });
});

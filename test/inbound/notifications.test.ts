import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeMediaServer, type FakeMediaServer } from '../fakes/inbound/media-server.js';
import * as P from '../fakes/inbound/payloads.js';
import { telegramHeaders } from '../fakes/inbound/signers.js';
import { startFakeTranscription, type FakeTranscriptionServer } from '../fakes/inbound/transcription-server.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { connect, eventually, eventsAbout, postWebhook, queuesIdle, type CreatedConnection } from './helpers.js';

// Inbound through to outbound webhook deliveries: what a subscriber actually receives.
let s: TestStack;
let app: AppCredentials;
let media: FakeMediaServer;
let tr: FakeTranscriptionServer;
let subscriber: Server;
let tg: CreatedConnection;
const received: any[] = [];

const BOT = '246810:notify-bot';

beforeAll(async () => {
  media = await startFakeMediaServer({ telegramToken: BOT });
  tr = await startFakeTranscription();
  subscriber = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      received.push(JSON.parse(body));
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => subscriber.listen(0, '127.0.0.1', r));
  s = await startTestStack({
    workers: ['inbound', 'ledger', 'transcription', 'webhook'],
    env: { TRANSCRIPTION_API_BASE: tr.base, TRANSCRIPTION_RETRY_BASE_MS: '20' },
  });
  app = await s.createApp();
  tg = await connect(s, app, 'TELEGRAM', { bot_token: BOT, api_base_url: media.base });
  const sub = await s.request('POST', '/v1/webhook-subscriptions', {
    auth: app,
    body: {
      name: 'all messages',
      target_url: `http://127.0.0.1:${(subscriber.address() as AddressInfo).port}/hook`,
      event_patterns: ['message.*'],
      secret: 'subscriber-secret-0123456789abcdef',
    },
  });
  expect(sub.status, sub.text).toBe(201);
});
afterAll(async () => {
  await s?.close();
  await media?.close();
  await tr?.close();
  await new Promise((r) => subscriber?.close(r));
});

const deliveryFor = (externalId: string) =>
  received.find((d) => d.event_type === 'message.inbound' && d.payload?.external_message_id === externalId);

describe('webhook deliveries of inbound messages', () => {
  it('carries the message with sent_by the user and sent_to the connected account as a system user', async () => {
    expect((await postWebhook(s, tg.path, JSON.stringify(P.tgText(1, 11, 'notify me')), telegramHeaders())).status).toBe(200);
    const d = await eventually(async () => deliveryFor(`${P.tgChat.id}:11`), 15_000, 'the webhook delivery');
    expect(d).toMatchObject({
      event_type: 'message.inbound',
      app_id: app.appId,
      payload: {
        message: { text: 'notify me', role: 'user', type: 'text' },
        platform: 'telegram',
        external_message_id: `${P.tgChat.id}:11`,
      },
      edges: {
        sent_by: { platform_user_id: expect.any(String), external_id: String(P.tgUser.id), name: 'Ann Lee' },
        sent_to: { platform_user_id: expect.any(String), external_id: '246810', is_system_user: true },
      },
    });
    expect(d.edges.sent_by.is_system_user).toBeUndefined();
  });

  it('notifies about a voice message only after its transcript is there (docs/guide.md, streams)', async () => {
    media.addFile('voice-n', Buffer.concat([Buffer.from('OggS'), Buffer.alloc(64)]), 'audio/ogg');
    let release!: () => void;
    tr.gate = new Promise<void>((r) => (release = r));
    tr.answer = { text: 'ring me at five', language: 'english', duration: 2 };
    expect((await postWebhook(s, tg.path, JSON.stringify(P.tgVoice(2, 12, 'voice-n')), telegramHeaders())).status).toBe(200);
    await eventually(async () => (tr.calls.length > 0 ? true : undefined), 10_000, 'the transcription request');
    // Everything but the transcription has run: no event, so no notification.
    await queuesIdle(s, 10_000, ['inbound', 'ledger']);
    expect(deliveryFor(`${P.tgChat.id}:12`)).toBeUndefined();
    expect(await eventsAbout(s, app.appId, 'message.inbound', `${P.tgChat.id}:12`)).toEqual([]);
    release();
    tr.gate = undefined;
    const d = await eventually(async () => deliveryFor(`${P.tgChat.id}:12`), 15_000, 'the voice delivery');
    expect(d.payload.message).toMatchObject({ type: 'voice', transcript: 'ring me at five', transcription: { status: 'completed' } });
  });
});

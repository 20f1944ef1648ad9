import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueFor } from '../../src/queues.js';
import { connect } from '../helpers/connections.js';
import { openSse } from '../helpers/sse.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { edgesOf, eventsOf, waitForEvent, waitForEvents } from '../inbound/helpers.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';

/**
 * The sandbox platform end to end, through the real service and workers: sends recorded like
 * any platform's with delivered/read reports from delayed inbound jobs, chosen failures, and
 * the end user's messages through POST …/sandbox/messages into the one inbound pipeline.
 */
let s: TestStack;
let app: AppCredentials;
let conn: { id: string; webhook_url: string };
let hook: Receiver;

const PNG = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');

const simulate = (body: unknown, auth = app, id = conn.id) =>
  s.request('POST', `/v1/platform-connections/${id}/sandbox/messages`, { auth, body });

const send = (to: string, message: string, auth = app, id = conn.id) =>
  s.request('POST', '/v1/messages', { auth, body: { platform_connection_id: id, to_external_id: to, message } });

beforeAll(async () => {
  s = await startTestStack();
  app = await s.createApp();
  conn = await connect(s, app, 'SANDBOX', { delivered_after_ms: 150, read_after_ms: 400 });
  hook = await startReceiver();
  const sub = await s.request('POST', '/v1/webhook-subscriptions', {
    auth: app,
    body: { name: 'sandbox hook', target_url: hook.url, event_patterns: ['message.*'] },
  });
  expect(sub.status, sub.text).toBe(201);
});
afterAll(async () => {
  await hook?.close();
  await s?.close();
});

describe('sending through the sandbox', () => {
  it('records the send, then delivered and read on the connection schedule, from delayed inbound jobs', async () => {
    const r = await send('ada', 'Hello Ada');
    expect(r.status, r.text).toBe(201);
    expect(r.json.external_message_id).toMatch(/^sbx-/);
    const sentAt = Date.now();
    const outbound = await waitForEvent(s, app.appId, 'message.outbound', (e) => e.id === r.json.id);
    expect(outbound.payload).toMatchObject({ platform: 'sandbox', status: 'sent', message: { text: 'Hello Ada' } });

    const statuses = await waitForEvents(s, app.appId, 'message.status', 2);
    const mine = statuses.filter((e) => e.payload.external_message_id === r.json.external_message_id);
    expect(mine.map((e) => e.payload.status)).toEqual(['delivered', 'read']);
    for (const e of mine) expect(e.origin_event_id).toBe(r.json.id);
    // Each report is dated when it was due: 150 ms and 400 ms after the send was recorded.
    const [delivered, read] = mine.map((e) => Date.parse(e.payload.timestamp));
    expect(read - delivered).toBeGreaterThanOrEqual(200);
    expect(read - delivered).toBeLessThan(400);
    expect(Date.now() - sentAt).toBeGreaterThanOrEqual(300);
    const [row] = await s.deps.sql`SELECT status, delivery_status FROM outbound_messages WHERE id = ${r.json.id}`;
    expect(row).toEqual({ status: 'sent', delivery_status: 'read' });
    // Also under their documented alias names (docs/events.md), on the webhook.
    const got = await hook.waitFor(
      2,
      (x) => x.json?.event_type === 'message.status' && x.json.payload.external_message_id === r.json.external_message_id,
    );
    expect(got.map((x) => x.json.payload.status).sort()).toEqual(['delivered', 'read']);
  });

  it('waits in BullMQ’s delayed set, not in a timer of any process', async () => {
    const slow = await connect(s, app, 'SANDBOX', { delivered_after_ms: 60_000, read_after_ms: 120_000 }, 'slow sandbox');
    const r = await send('bob', 'later', app, slow.id);
    expect(r.status, r.text).toBe(201);
    const delayed = await queueFor(s.deps.queues, 'inbound', app.appId).getDelayed();
    const mine = delayed.filter((j) => j.data.connection_id === slow.id);
    expect(mine.map((j) => j.data.dedupe_key).sort()).toEqual([
      `status:${r.json.external_message_id}:delivered`,
      `status:${r.json.external_message_id}:read`,
    ]);
    expect(mine.map((j) => j.opts.delay).sort()).toEqual([expect.any(Number), expect.any(Number)]);
    for (const j of mine) expect(j.opts.delay).toBeGreaterThan(50_000);
    await Promise.all(mine.map((j) => j.remove()));
  });

  it('fails a send whose text starts with /fail CODE with that platform error', async () => {
    const r = await send('ada', '/fail RECIPIENT_BLOCKED the user blocked you');
    expect(r.status, r.text).toBe(422);
    expect(r.json.error.code).toBe('RECIPIENT_BLOCKED');
    expect(r.json.error.details[0]).toMatchObject({ platform_code: 'RECIPIENT_BLOCKED', platform_message: 'the user blocked you' });
    const id = r.json.error.details[0].message_id;
    const failed = await waitForEvent(s, app.appId, 'message.status', (e) => e.payload.message_id === id);
    expect(failed.payload).toMatchObject({ status: 'failed', platform: 'sandbox', error: { code: 'RECIPIENT_BLOCKED' } });
    const message = await s.request('GET', `/v1/messages/${id}`, { auth: app });
    expect(message.json).toMatchObject({ status: 'failed', error: { code: 'RECIPIENT_BLOCKED' } });

    const unknown = await send('ada', '/fail NOPE');
    expect(unknown.status).toBe(422);
    expect(unknown.json.error).toMatchObject({ code: 'PLATFORM_REJECTED' });
    expect(unknown.json.error.message).toContain('RECIPIENT_BLOCKED');
  });

  it('refuses a recipient id it cannot hold before anything is stored', async () => {
    const r = await send('has space', 'hi');
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe('INVALID_RECIPIENT');
  });
});

describe('POST /v1/platform-connections/:id/sandbox/messages', () => {
  it('records a text message from the end user as message.inbound, with the user and conversation, on the stream and the webhook', async () => {
    const stream = await openSse(`${s.base}/events/stream?eventTypes=message.inbound`, { headers: app.headers });
    try {
      const r = await simulate({ from: 'grace', from_name: 'Grace Hopper', text: 'Hi there', message_id: 'g-1' });
      expect(r.status, r.text).toBe(202);
      expect(r.json.external_message_id).toBe('g-1');
      const event = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.id === r.json.event_id);
      expect(event.payload).toMatchObject({
        platform: 'sandbox',
        external_message_id: 'g-1',
        message: { text: 'Hi there', role: 'user', type: 'text' },
      });
      const edges = await edgesOf(s, event.id);
      expect(edges.map((e) => [e.edge_type, e.external_id, e.name])).toEqual([
        ['sent_by', 'grace', 'Grace Hopper'],
        ['sent_to', 'sandbox', 'sandbox test'],
      ]);
      const conversation = await s.request('GET', `/v1/conversations/${event.conversation_id}`, { auth: app });
      expect(conversation.status).toBe(200);
      expect(conversation.json.external_id).toBe('grace');

      let frame = await stream.next(10_000);
      while (frame && !frame.data?.includes(r.json.event_id)) frame = await stream.next(10_000);
      expect(JSON.parse(frame!.data!)).toMatchObject({ id: r.json.event_id, eventType: 'message.inbound', platformConnectionId: conn.id });
      const [delivered] = await hook.waitFor(1, (x) => x.json?.event_id === r.json.event_id);
      expect(delivered.json).toMatchObject({ event_type: 'message.inbound', payload: { message: { text: 'Hi there' } } });
    } finally {
      stream.close();
    }
  });

  it('records a repeated message_id once (a redelivery)', async () => {
    const first = await simulate({ from: 'grace', text: 'once', message_id: 'dup-1' });
    const again = await simulate({ from: 'grace', text: 'once', message_id: 'dup-1' });
    expect(again.json).toEqual(first.json);
    await waitForEvent(s, app.appId, 'message.inbound', (e) => e.id === first.json.event_id);
    // Something sent after it is recorded after it: once that one is in, the repeat had its chance.
    const after = await simulate({ from: 'grace', text: 'after' });
    await waitForEvent(s, app.appId, 'message.inbound', (e) => e.id === after.json.event_id);
    const copies = (await eventsOf(s, app.appId, 'message.inbound')).filter((e) => e.payload.external_message_id === 'dup-1');
    expect(copies).toHaveLength(1);
  });

  it('stores media as a file of the event', async () => {
    const r = await simulate({
      from: 'grace',
      text: 'a picture',
      media: { content_base64: PNG.toString('base64'), mime_type: 'image/png', filename: 'dot.png' },
    });
    expect(r.status, r.text).toBe(202);
    const event = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.id === r.json.event_id);
    expect(event.payload.message).toMatchObject({ type: 'image', caption: 'a picture', media: { mime_type: 'image/png' } });
    const file = await s.request('GET', `/v1/files/${event.payload.message.media.id}`, { auth: app });
    expect(file.json).toMatchObject({ filename: 'dot.png', size_bytes: PNG.length });
    expect(event.attachments).toEqual([expect.objectContaining({ kind: 'image', file_id: event.payload.message.media.id })]);
  });

  it('links a reply to the message it answers, the user’s own or one sent to them', async () => {
    const sent = await send('grace', 'How can I help?');
    expect(sent.status).toBe(201);
    const reply = await simulate({ from: 'grace', text: 'With this', reply_to: sent.json.external_message_id });
    const event = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.id === reply.json.event_id);
    expect(event.payload.message.reply_to).toEqual({ external_message_id: sent.json.external_message_id, event_id: sent.json.id });
    expect(event.origin_event_id).toBe(sent.json.id);

    const second = await simulate({ from: 'grace', text: 'and that', reply_to: reply.json.external_message_id });
    const again = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.id === second.json.event_id);
    expect(again.origin_event_id).toBe(reply.json.event_id);

    const unknown = await simulate({ from: 'grace', text: 'to nothing', reply_to: 'never-sent' });
    const orphan = await waitForEvent(s, app.appId, 'message.inbound', (e) => e.id === unknown.json.event_id);
    expect(orphan.payload.message.reply_to).toEqual({ external_message_id: 'never-sent', event_id: null });
    expect(orphan.origin_event_id).toBeNull();
  });

  it('records a reaction to a sent message as message.reaction following from it', async () => {
    const sent = await send('grace', 'Deal?');
    const r = await simulate({ from: 'grace', reaction: { message_id: sent.json.external_message_id, emoji: '👍' } });
    expect(r.status, r.text).toBe(202);
    const event = await waitForEvent(s, app.appId, 'message.reaction', (e) => e.id === r.json.event_id);
    expect(event.payload).toMatchObject({
      reaction: { emoji: '👍', message_id: sent.json.external_message_id },
      action: 'added',
      platform: 'sandbox',
    });
    expect(event.origin_event_id).toBe(sent.json.id);
  });

  it('is signature-free on the connection’s webhook URL too, in the same shape', async () => {
    const body = JSON.stringify({
      type: 'message',
      id: 'hook-1',
      from: { id: 'linus' },
      text: 'via the URL',
      timestamp: new Date().toISOString(),
    });
    const r = await fetch(conn.webhook_url.replace(/^https?:\/\/[^/]+/, s.base), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    expect(r.status).toBe(200);
    await waitForEvent(s, app.appId, 'message.inbound', (e) => e.payload.external_message_id === 'hook-1');
    const bad = await fetch(conn.webhook_url.replace(/^https?:\/\/[^/]+/, s.base), { method: 'POST', body: '{"type":"nope"}' });
    expect(bad.status).toBe(400);
  });

  it('answers 404 for another application’s connection, and 403 without events:write', async () => {
    const other = await s.createApp();
    const r = await simulate({ from: 'mallory', text: 'hi' }, other);
    expect(r.status).toBe(404);
    expect(r.json.error.code).toBe('PLATFORM_CONNECTION_NOT_FOUND');
    expect((await simulate({ from: 'mallory', text: 'hi' }, app, 'not-a-uuid')).status).toBe(404);
    const reader = await s.createKey(app.appId, ['events:read']);
    expect((await simulate({ from: 'grace', text: 'hi' }, reader)).status).toBe(403);
    expect(
      (await s.request('POST', `/v1/platform-connections/${conn.id}/sandbox/messages`, { body: { from: 'a', text: 'b' } })).status,
    ).toBe(401);
  });

  it('refuses other platforms (409) and disabled connections (422)', async () => {
    const tg = await connect(s, app, 'TELEGRAM', { bot_token: '123:abc' });
    const r = await simulate({ from: 'grace', text: 'hi' }, app, tg.id);
    expect(r.status).toBe(409);
    expect(r.json.error.code).toBe('CONFLICT');
    const off = await connect(s, app, 'SANDBOX', {}, 'off');
    expect((await s.request('PATCH', `/v1/platform-connections/${off.id}`, { auth: app, body: { status: 'DISABLED' } })).status).toBe(200);
    const disabled = await simulate({ from: 'grace', text: 'hi' }, app, off.id);
    expect(disabled.status).toBe(422);
    expect(disabled.json.error.code).toBe('CONNECTION_DISABLED');
  });

  it.each([
    ['no sender', { text: 'hi' }, ['from']],
    ['nothing said', { from: 'grace' }, ['text']],
    ['the account itself as sender', { from: 'sandbox', text: 'hi' }, ['from']],
    ['a sender id with spaces', { from: 'a b', text: 'hi' }, ['from']],
    ['a reaction with text', { from: 'grace', text: 'hi', reaction: { message_id: 'x', emoji: '👍' } }, ['text']],
    ['media that is not base64', { from: 'grace', media: { content_base64: '***', mime_type: 'image/png' } }, ['media', 'content_base64']],
    [
      'media with both bytes and a URL',
      { from: 'grace', media: { content_base64: 'aGk=', url: 'https://example.com/a.png', mime_type: 'image/png' } },
      ['media'],
    ],
    ['an unknown field', { from: 'grace', text: 'hi', chat: 'x' }, ['chat']],
  ])('answers 400 VALIDATION_ERROR for %s', async (_what, body, path) => {
    const r = await simulate(body);
    expect(r.status, r.text).toBe(400);
    expect(r.json.error.code).toBe('VALIDATION_ERROR');
    expect(r.json.error.details.map((d: { path: unknown }) => d.path)).toContainEqual(path);
  });
});

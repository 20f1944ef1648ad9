import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { connect, eventually } from '../helpers/connections.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { TelegramFake } from '../fakes/telegram.js';
import { claimIdempotencyKey } from '../../src/idempotency.js';
import { sendMessageInput } from '../../src/messages/messages.js';

let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;
let tg: TelegramFake;
let conn: { id: string };
const token = '777001:secret-bot-token_abcdef';

beforeAll(async () => {
  tg = await TelegramFake.start();
  s = await startTestStack({ workers: ['ledger', 'send'] });
  a = await s.createApp();
  b = await s.createApp();
  conn = await connect(s, a, 'TELEGRAM', { bot_token: token, api_base_url: tg.url });
});
afterAll(async () => {
  await s.close();
  await tg.close();
});
beforeEach(() => tg.reset());

const send = (body: Record<string, unknown>, auth = a, headers: Record<string, string> = {}) =>
  s.request('POST', '/v1/messages', { auth, body: { platform_connection_id: conn.id, ...body }, headers });

describe('POST /v1/messages (Telegram)', () => {
  it('sends, answers 201 with the platform id, and records message.outbound with sent_to / sent_by edges', async () => {
    const r = await send({ to_external_id: '4242', message: 'hello *world*', parse_mode: 'MarkdownV2' });
    expect(r.status, r.text).toBe(201);
    expect(r.json).toEqual({ id: expect.any(String), status: 'sent', external_message_id: '1', created_at: expect.any(String) });
    expect(tg.server.requests).toHaveLength(1);
    expect(tg.server.requests[0].json).toEqual({ chat_id: '4242', text: 'hello *world*', parse_mode: 'MarkdownV2' });

    const ev = await s.request('GET', `/v1/events/${r.json.id}`, { auth: a });
    expect(ev.status).toBe(200);
    expect(ev.json).toMatchObject({
      id: r.json.id,
      event_type: 'message.outbound',
      payload: {
        message: { text: 'hello *world*', role: 'assistant' },
        platform: 'telegram',
        external_message_id: '1',
        conversation_id: expect.any(String),
      },
    });
    const edges = Object.fromEntries(
      ev.json.edges.map((e: { edge_type: string; target_node_id: string }) => [e.edge_type, e.target_node_id]),
    );
    const users = await s.deps.sql<{ id: string; external_id: string; is_system_user: boolean }[]>`
      SELECT id, external_id, is_system_user FROM platform_users WHERE id IN (${edges.sent_to}, ${edges.sent_by})`;
    expect(users.find((u) => u.id === edges.sent_to)).toMatchObject({ external_id: '4242', is_system_user: false });
    expect(users.find((u) => u.id === edges.sent_by)).toMatchObject({ external_id: '777001', is_system_user: true });

    const got = await s.request('GET', `/v1/messages/${r.json.id}`, { auth: a });
    expect(got.json).toMatchObject({ id: r.json.id, status: 'sent', external_message_id: '1', to_external_id: '4242' });
  });

  it('GraphQL sendMessage answers id and status{success message externalMessageId}', async () => {
    const r = await s.gql(
      a,
      `mutation($c: ID!) { sendMessage(platformConnectionId: $c, toExternalId: "4243", message: "via graphql") { id status { success message externalMessageId } } }`,
      { c: conn.id },
    );
    expect(r.json.errors).toBeUndefined();
    expect(r.json.data.sendMessage).toEqual({ id: expect.any(String), status: { success: true, message: 'sent', externalMessageId: '1' } });
    expect(tg.server.requests[0].json).toEqual({ chat_id: '4243', text: 'via graphql' });
  });

  it("answers 404 PLATFORM_CONNECTION_NOT_FOUND for an unknown id or another application's connection", async () => {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      const r = await s.request('POST', '/v1/messages', {
        auth: a,
        body: { platform_connection_id: id, to_external_id: '1', message: 'x' },
      });
      expect(r.status).toBe(404);
      expect(r.json.error.code).toBe('PLATFORM_CONNECTION_NOT_FOUND');
    }
    const other = await send({ to_external_id: '1', message: 'x' }, b);
    expect(other.status).toBe(404);
    const g = await s.gql(b, `mutation($c: ID!) { sendMessage(platformConnectionId: $c, toExternalId: "1", message: "x") { id } }`, {
      c: conn.id,
    });
    expect(g.json.errors[0].extensions.code).toBe('PLATFORM_CONNECTION_NOT_FOUND');
    expect(tg.server.requests).toHaveLength(0);
  });

  it('refuses a too-long text and a non-numeric chat id before calling the platform, writing nothing', async () => {
    const long = await send({ to_external_id: '4242', message: 'x'.repeat(4097) });
    expect(long.status).toBe(400);
    expect(long.json.error).toMatchObject({ code: 'MESSAGE_TOO_LONG', details: [{ path: ['message'] }] });
    const bad = await send({ to_external_id: '@someone', message: 'hi' });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ code: 'INVALID_RECIPIENT', details: [{ path: ['to_external_id'] }] });
    const g = await s.gql(
      a,
      `mutation($c: ID!, $m: String!) { sendMessage(platformConnectionId: $c, toExternalId: "1", message: $m) { id } }`,
      { c: conn.id, m: 'y'.repeat(4097) },
    );
    expect(g.json.errors[0].extensions.code).toBe('MESSAGE_TOO_LONG');
    expect(tg.server.requests).toHaveLength(0);
    const [{ n }] = await s.deps.sql<
      { n: number }[]
    >`SELECT count(*)::int AS n FROM outbound_messages WHERE text LIKE 'xxxx%' OR to_external_id = '@someone'`;
    expect(n).toBe(0);
  });

  it('answers 400 VALIDATION_ERROR naming a missing field', async () => {
    const r = await s.request('POST', '/v1/messages', { auth: a, body: { platform_connection_id: conn.id, message: 'x' } });
    expect(r.status).toBe(400);
    expect(r.json.error.details[0].path).toEqual(['to_external_id']);
  });

  it('a permanent refusal is 422 with the gateway code and the platform code/text, not retried, recorded as message.status failed', async () => {
    tg.blockedChats.add('5000');
    const r = await send({ to_external_id: '5000', message: 'are you there' });
    expect(r.status).toBe(422);
    expect(r.json.error).toMatchObject({
      code: 'RECIPIENT_BLOCKED',
      details: [{ platform_code: 403, platform_message: 'Forbidden: bot was blocked by the user', message_id: expect.any(String) }],
    });
    expect(tg.server.requests).toHaveLength(1);
    const messageId = r.json.error.details[0].message_id;
    const failed = await eventually(
      async () => {
        const [e] = await s.deps.sql<
          { payload: any }[]
        >`SELECT payload FROM events WHERE app_id = ${a.appId} AND event_type = 'message.status' AND payload->>'message_id' = ${messageId}`;
        return e;
      },
      5000,
      'message.status failed',
    );
    expect(failed.payload).toMatchObject({ status: 'failed', error: { code: 'RECIPIENT_BLOCKED', platform_code: 403 } });

    tg.notStartedChats.add('5001');
    const ns = await send({ to_external_id: '5001', message: 'hi' });
    expect(ns.status).toBe(422);
    expect(ns.json.error.code).toBe('RECIPIENT_NOT_STARTED');
  });

  it('retries 5xx with backoff and sends exactly once', async () => {
    tg.server.script(2, { status: 502, body: 'Bad Gateway' });
    const r = await send({ to_external_id: '6000', message: 'persist' });
    expect(r.status, r.text).toBe(201);
    expect(tg.server.requests).toHaveLength(3);
    expect(tg.accepted).toHaveLength(1);
    const [{ n }] = await s.deps.sql<
      { n: number }[]
    >`SELECT count(*)::int AS n FROM events WHERE app_id = ${a.appId} AND event_type = 'message.outbound' AND payload->'message'->>'text' = 'persist'`;
    expect(n).toBe(1);
    const [m] = await s.deps.sql<{ attempts: number }[]>`SELECT attempts FROM outbound_messages WHERE id = ${r.json.id}`;
    expect(m.attempts).toBe(3);
  });

  it("honours a 429's retry_after before the next try", async () => {
    tg.server.script(1, {
      status: 429,
      body: { ok: false, error_code: 429, description: 'Too Many Requests: retry after 1', parameters: { retry_after: 1 } },
    });
    const r = await send({ to_external_id: '6001', message: 'patience' });
    expect(r.status, r.text).toBe(201);
    const [first, second] = tg.server.requests;
    expect(second.at - first.at).toBeGreaterThanOrEqual(990);
    expect(tg.accepted).toHaveLength(1);
  });

  it('replays the same message for a repeated Idempotency-Key (the platform is called once) and refuses another body', async () => {
    const headers = { 'Idempotency-Key': 'send-once-1' };
    const first = await send({ to_external_id: '7000', message: 'only once' }, a, headers);
    const again = await send({ to_external_id: '7000', message: 'only once' }, a, headers);
    expect(first.status).toBe(201);
    expect(again.status).toBe(201);
    expect(again.json.id).toBe(first.json.id);
    expect(again.json.external_message_id).toBe(first.json.external_message_id);
    expect(tg.accepted).toHaveLength(1);
    const conflict = await send({ to_external_id: '7000', message: 'something else' }, a, headers);
    expect(conflict.status).toBe(409);
    expect(conflict.json.error.code).toBe('IDEMPOTENCY_CONFLICT');
  });

  it('a repeated Idempotency-Key whose first request died after claiming the key (before recording the message) sends it once', async () => {
    const body = { platform_connection_id: conn.id, to_external_id: '7100', message: 'claimed, then the database went away' };
    // The first request's only trace: the claimed key (it died before its INSERT, e.g. in a database restart).
    const claimed = await claimIdempotencyKey(s.deps.sql, a.appId, 'messages', 'send-claimed-1', sendMessageInput.parse(body));
    expect(claimed.ok && !claimed.value.replay).toBe(true);
    const retry = await send(body, a, { 'Idempotency-Key': 'send-claimed-1' });
    expect(retry.status, retry.text).toBe(201);
    expect(retry.json.id).toBe(claimed.ok && claimed.value.resourceId);
    expect(tg.accepted.filter((r) => r.json?.text === body.message)).toHaveLength(1);
    const again = await send(body, a, { 'Idempotency-Key': 'send-claimed-1' });
    expect(again.json).toMatchObject({ id: retry.json.id, external_message_id: retry.json.external_message_id });
    expect(tg.accepted.filter((r) => r.json?.text === body.message)).toHaveLength(1);
  });

  it('a revoked token fails with PLATFORM_AUTH_FAILED and turns the connection health red; a later success turns it green', async () => {
    tg.revokedTokens.add(token);
    try {
      const r = await send({ to_external_id: '8000', message: 'x' });
      expect(r.status).toBe(422);
      expect(r.json.error.code).toBe('PLATFORM_AUTH_FAILED');
      const c = await s.request('GET', `/v1/platform-connections/${conn.id}`, { auth: a });
      expect(c.json.health).toMatchObject({
        status: 'red',
        consecutive_failures: 1,
        last_error: expect.stringContaining('PLATFORM_AUTH_FAILED'),
      });
      expect(c.text).not.toContain(token);
    } finally {
      tg.revokedTokens.clear();
    }
    expect((await send({ to_external_id: '8000', message: 'y' })).status).toBe(201);
    // Health is written beside the settled message, not before it: it may trail the 201 briefly.
    const deadline = Date.now() + 5_000;
    let health: unknown;
    do {
      health = (await s.request('GET', `/v1/platform-connections/${conn.id}`, { auth: a })).json.health;
      if ((health as { status?: string }).status === 'green') break;
      await new Promise((r) => setTimeout(r, 50));
    } while (Date.now() < deadline);
    expect(health).toMatchObject({ status: 'green', consecutive_failures: 0 });
  });

  it('refuses sends on a disabled connection', async () => {
    const other = await connect(s, a, 'TELEGRAM', { bot_token: '777002:another_token', api_base_url: tg.url });
    await s.request('PATCH', `/v1/platform-connections/${other.id}`, { auth: a, body: { status: 'DISABLED' } });
    const r = await s.request('POST', '/v1/messages', {
      auth: a,
      body: { platform_connection_id: other.id, to_external_id: '1', message: 'x' },
    });
    expect(r.status).toBe(422);
    expect(r.json.error.code).toBe('CONNECTION_DISABLED');
  });

  it('needs events:write', async () => {
    const reader = await s.createKey(a.appId, ['events:read']);
    const r = await send({ to_external_id: '1', message: 'x' }, reader);
    expect(r.status).toBe(403);
  });
});

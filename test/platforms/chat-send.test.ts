import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { discordSend } from '../../src/platforms/discord/send.js';
import { slackSend } from '../../src/platforms/slack/send.js';
import { DiscordFake } from '../fakes/discord.js';
import { SlackFake } from '../fakes/slack.js';

const ctx = { timeoutMs: 2000 };
let slack: SlackFake;
let discord: DiscordFake;

beforeAll(async () => {
  slack = await SlackFake.start({ botToken: 'xoxb-good' });
  discord = await DiscordFake.start({ botToken: 'disc-token' });
});
afterAll(async () => {
  await Promise.all([slack.close(), discord.close()]);
});
beforeEach(() => {
  slack.server.reset();
  discord.server.reset();
});

describe('Slack send', () => {
  const config = () => ({ bot_token: 'xoxb-good', signing_secret: 'sig', api_base_url: slack.url });

  it('calls chat.postMessage with a bearer token and answers the ts', async () => {
    const out = await slackSend.send(config(), { to: 'C0123456789', text: 'hello' }, ctx);
    expect(out).toMatchObject({ ok: true, externalMessageId: expect.stringMatching(/^\d+\.\d{6}$/) });
    const [r] = slack.server.requests;
    expect(r.path).toBe('/api/chat.postMessage');
    expect(r.headers.authorization).toBe('Bearer xoxb-good');
    expect(r.json).toEqual({ channel: 'C0123456789', text: 'hello' });
  });

  it('replies in a thread when given one', async () => {
    await slackSend.send(config(), { to: 'C0123456789', text: 'in thread', threadId: '1700000000.000100' }, ctx);
    expect(slack.server.requests[0].json.thread_ts).toBe('1700000000.000100');
  });

  it('maps HTTP 200 {ok:false} errors: not_in_channel, channel_not_found, is_archived, invalid_auth, msg_too_long, internal_error, others', async () => {
    slack.notInChannel.add('C0000000001');
    slack.archived.add('C0000000002');
    const cases: [string, Record<string, unknown>][] = [
      ['C0000000001', { code: 'RECIPIENT_NOT_STARTED', platformCode: 'not_in_channel', retryable: false }],
      ['C0000000002', { code: 'RECIPIENT_BLOCKED', platformCode: 'is_archived' }],
      ['Cbadlower', { code: 'INVALID_RECIPIENT', platformCode: 'channel_not_found' }],
    ];
    for (const [to, error] of cases) expect(await slackSend.send(config(), { to, text: 'x' }, ctx)).toMatchObject({ ok: false, error });
    expect(await slackSend.send({ ...config(), bot_token: 'xoxb-bad' }, { to: 'C0123456789', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_AUTH_FAILED', platformCode: 'invalid_auth' },
    });
    for (const [error, code] of [
      ['msg_too_long', 'MESSAGE_TOO_LONG'],
      ['internal_error', 'PLATFORM_UNAVAILABLE'],
      ['restricted_action', 'PLATFORM_REJECTED'],
      ['token_revoked', 'PLATFORM_AUTH_FAILED'],
    ]) {
      slack.server.script(1, { status: 200, body: { ok: false, error } });
      expect(await slackSend.send(config(), { to: 'C0123456789', text: 'x' }, ctx)).toMatchObject({
        ok: false,
        error: { code, platformCode: error },
      });
    }
  });

  it('maps HTTP 429 + Retry-After to PLATFORM_RATE_LIMITED with the wait', async () => {
    slack.server.script(1, { status: 429, body: { ok: false, error: 'ratelimited' }, headers: { 'retry-after': '30' } });
    expect(await slackSend.send(config(), { to: 'C0123456789', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_RATE_LIMITED', retryAfterMs: 30_000, retryable: true },
    });
  });

  it('uploads files the external way and shares them into the channel after the text', async () => {
    const out = await slackSend.send(
      config(),
      { to: 'C0123456789', text: 'report', files: [{ filename: 'r.csv', mimeType: 'text/csv', data: Buffer.from('a,b\n1,2\n') }] },
      ctx,
    );
    expect(out.ok).toBe(true);
    expect(slack.server.requests.map((r) => r.path)).toEqual([
      '/api/chat.postMessage',
      '/api/files.getUploadURLExternal',
      expect.stringMatching(/^\/upload\/F/),
      '/api/files.completeUploadExternal',
    ]);
    expect(slack.server.requests[1].form).toEqual({ filename: 'r.csv', length: '8' });
    const fileId = slack.server.requests[2].path.split('/').pop()!;
    expect(slack.uploads.get(fileId)?.data).toEqual(Buffer.from('a,b\n1,2\n'));
    expect(slack.server.requests[3].json).toEqual({ files: [{ id: fileId, title: 'r.csv' }], channel_id: 'C0123456789' });
  });

  it('checks channel ids and validates config (xoxb- bot token, signing secret)', () => {
    expect(slackSend.checkRecipient('C0123456789')).toBeUndefined();
    expect(slackSend.checkRecipient('#general')).toBeDefined();
    expect(slackSend.configSchema.safeParse({ bot_token: 'xoxp-user', signing_secret: 's' }).success).toBe(false);
    expect(slackSend.configSchema.safeParse({ bot_token: 'xoxb-1', signing_secret: 's' }).success).toBe(true);
    expect(slackSend.secretFields).toEqual(['bot_token', 'signing_secret']);
  });
});

describe('Discord send', () => {
  const channel = '112233445566778899';
  const config = () => ({
    bot_token: 'disc-token',
    application_id: '998877665544332211',
    public_key: 'ab'.repeat(32),
    api_base_url: discord.url,
  });

  it('posts {content} with "Bot <token>" and answers the message id', async () => {
    const out = await discordSend.send(config(), { to: channel, text: 'hello' }, ctx);
    expect(out).toMatchObject({ ok: true, externalMessageId: expect.stringMatching(/^\d{17,20}$/) });
    const [r] = discord.server.requests;
    expect(r.path).toBe(`/api/v10/channels/${channel}/messages`);
    expect(r.headers.authorization).toBe('Bot disc-token');
    expect(r.json).toEqual({ content: 'hello' });
  });

  it('maps 429 {retry_after float} to PLATFORM_RATE_LIMITED with ms', async () => {
    discord.server.script(1, {
      status: 429,
      body: { message: 'You are being rate limited.', retry_after: 1.234, global: false },
      headers: { 'retry-after': '2' },
    });
    expect(await discordSend.send(config(), { to: channel, text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_RATE_LIMITED', retryAfterMs: 1234 },
    });
  });

  it('maps 401, 10003, 50001, 50007, 50035 too long, 5xx', async () => {
    discord.unknownChannels.add('100000000000000001');
    discord.noAccess.add('100000000000000002');
    discord.closedDms.add('100000000000000003');
    expect(await discordSend.send({ ...config(), bot_token: 'nope' }, { to: channel, text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_AUTH_FAILED' },
    });
    expect(await discordSend.send(config(), { to: '100000000000000001', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'INVALID_RECIPIENT', platformCode: 10003 },
    });
    expect(await discordSend.send(config(), { to: '100000000000000002', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'RECIPIENT_NOT_STARTED', platformCode: 50001 },
    });
    expect(await discordSend.send(config(), { to: '100000000000000003', text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'RECIPIENT_BLOCKED', platformCode: 50007 },
    });
    expect(await discordSend.send(config(), { to: channel, text: 'y'.repeat(2001) }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'MESSAGE_TOO_LONG', platformCode: 50035 },
    });
    discord.server.script(1, { status: 502, body: '<html>bad gateway</html>' });
    expect(await discordSend.send(config(), { to: channel, text: 'x' }, ctx)).toMatchObject({
      ok: false,
      error: { code: 'PLATFORM_UNAVAILABLE', retryable: true },
    });
  });

  it('uploads files as multipart payload_json + files[n]', async () => {
    const out = await discordSend.send(
      config(),
      { to: channel, text: 'pic', files: [{ filename: 'a.png', mimeType: 'image/png', data: Buffer.from('png') }] },
      ctx,
    );
    expect(out.ok).toBe(true);
    const [r] = discord.server.requests;
    expect(JSON.parse(r.form!.payload_json)).toEqual({ content: 'pic', attachments: [{ id: 0, filename: 'a.png' }] });
    expect(r.files).toEqual([{ field: 'files[0]', filename: 'a.png', type: 'image/png', data: Buffer.from('png') }]);
  });

  it('checks snowflakes and the 2000 limit; public_key is not a secret', () => {
    expect(discordSend.checkRecipient(channel)).toBeUndefined();
    expect(discordSend.checkRecipient('general')).toBeDefined();
    expect(discordSend.maxTextLength).toBe(2000);
    expect(discordSend.secretFields).toEqual(['bot_token']);
    expect(discordSend.configSchema.safeParse({ ...config(), public_key: 'zz' }).success).toBe(false);
  });
});

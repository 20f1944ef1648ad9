import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { discordCommand } from '../fakes/inbound/payloads.js';
import { discordHeaders, discordKeys, slackHeaders } from '../fakes/inbound/signers.js';
import { connect, inboundJobCount, postWebhook, type CreatedConnection } from '../inbound/helpers.js';

let s: TestStack;
let app: AppCredentials;
let discord: CreatedConnection;
let slack: CreatedConnection;
const keys = discordKeys();
const SIGNING = 'replay-signing-secret';
const sixMinutesAgo = () => Math.floor(Date.now() / 1000) - 360;

beforeAll(async () => {
  s = await startTestStack({ workers: false });
  app = await s.createApp();
  discord = await connect(s, app, 'DISCORD', { bot_token: 'b', application_id: '900000000000000001', public_key: keys.publicKeyHex });
  slack = await connect(s, app, 'SLACK', { bot_token: 'xoxb-1', signing_secret: SIGNING });
});
afterAll(() => s?.close());

describe('Discord interactions are refused outside the replay window, as Slack events are', () => {
  it('refuses a correctly signed interaction whose timestamp is six minutes old, with the status Slack gets, and queues nothing', async () => {
    const body = JSON.stringify(discordCommand('1175000000000000101', 'C1', 'U1', 'ask'));
    const before = await inboundJobCount(s);
    const replayed = await postWebhook(s, discord.path, body, discordHeaders(keys.privateKey, body, String(sixMinutesAgo())));

    const slackBody = JSON.stringify({
      type: 'event_callback',
      event_id: 'Ev-replay',
      event: { type: 'message', channel: 'C1', user: 'U1', text: 'hi', ts: '1700000000.000100' },
    });
    const slackReplayed = await postWebhook(s, slack.path, slackBody, slackHeaders(SIGNING, slackBody, sixMinutesAgo()));

    expect(slackReplayed.status).toBe(401);
    expect(replayed.status, replayed.text).toBe(slackReplayed.status);
    expect(JSON.parse(replayed.text).error).toMatchObject({ code: 'UNAUTHORIZED', message: expect.stringMatching(/timestamp/) });
    expect(await inboundJobCount(s)).toBe(before);
  });

  it('refuses a timestamp from the future beyond the window and one that is not a number', async () => {
    const body = JSON.stringify(discordCommand('1175000000000000102', 'C1', 'U1', 'ask'));
    const future = await postWebhook(
      s,
      discord.path,
      body,
      discordHeaders(keys.privateKey, body, String(Math.floor(Date.now() / 1000) + 360)),
    );
    expect(future.status).toBe(401);
    const junk = await postWebhook(s, discord.path, body, discordHeaders(keys.privateKey, body, 'yesterday'));
    expect(junk.status).toBe(401);
  });

  it('still accepts the same interaction signed now', async () => {
    const body = JSON.stringify(discordCommand('1175000000000000103', 'C1', 'U1', 'ask'));
    const r = await postWebhook(s, discord.path, body, discordHeaders(keys.privateKey, body));
    expect(r.status, r.text).toBe(200);
    expect(JSON.parse(r.text)).toEqual({ type: 5 });
  });
});

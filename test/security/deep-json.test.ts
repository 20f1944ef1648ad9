import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findUnstorable, storableText, TOO_DEEP } from '../../src/storable-text.js';
import * as P from '../fakes/inbound/payloads.js';
import { emailHeaders, metaHeaders, slackHeaders, telegramHeaders } from '../fakes/inbound/signers.js';
import { connect, postWebhook, waitForEvent } from '../inbound/helpers.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

/**
 * One entrance check for JSON input (JSON_MAX_DEPTH, default 64): an API body nested 4,150
 * levels deep used to be answered 202 and then wedge the ledger (its write never finished);
 * deeper ones answered 500. A platform delivery nested 20,000 deep was answered 200 and then
 * lost (its inbound job failed on every attempt). Now the API refuses with 400 before anything
 * is queued, and an acknowledged delivery is recorded with its too-deep part replaced.
 */
const deepJson = (depth: number, leaf = '1') => `${'{"a":'.repeat(depth)}${leaf}${'}'.repeat(depth)}`;
function deepValue(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

describe('the depth walk', () => {
  it('stops at the limit, whatever the depth: no stack overflow, a path to where it stopped', () => {
    const found = findUnstorable({ payload: deepValue(100_000) }, 64);
    expect(found?.problem).toBe('depth');
    expect(found?.path).toEqual(['payload', ...Array(63).fill('a')]);
    expect(findUnstorable(deepValue(64), 64)).toBeUndefined();
    expect(findUnstorable(deepValue(65), 64)?.problem).toBe('depth');
  });

  it('keeps an acknowledged value storable: parts past the limit become a marker', () => {
    const kept = storableText({ text: 'a\u0000b', deep: deepValue(20_000) }, 8) as { text: string; deep: unknown };
    expect(kept.text).toBe('a\uFFFDb');
    let v: unknown = kept.deep;
    for (let i = 0; i < 7; i++) v = (v as { a: unknown }).a;
    expect(v).toBe(TOO_DEEP);
  });
});

describe('at the API', () => {
  let s: TestStack;
  let a: AppCredentials;
  let b: AppCredentials;
  beforeAll(async () => {
    s = await startTestStack({ workers: ['ledger'] });
    [a, b] = await Promise.all([s.createApp(), s.createApp()]);
  });
  afterAll(() => s?.close());

  const events = async (app: AppCredentials) =>
    (await s.deps.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE app_id = ${app.appId}`)[0].n;

  it('refuses bodies nested 4,150 and 100,000 deep with 400 VALIDATION_ERROR, queueing nothing, while a neighbour posting at the same moment gets 201', async () => {
    for (const depth of [4_150, 100_000]) {
      const t = Date.now();
      const [deep, good] = await Promise.all([
        s.request('POST', '/v1/events', { auth: a, body: `{"event_type":"deep.z","payload":${deepJson(depth)}}` }),
        s.request('POST', '/v1/events', { auth: b, body: { event_type: 'good.beside', payload: { depth } } }),
      ]);
      expect(deep.status, deep.text).toBe(400);
      expect(deep.json.error).toMatchObject({ code: 'VALIDATION_ERROR', message: expect.stringMatching(/nested deeper than 64/) });
      expect(deep.json.error.details[0].path.slice(0, 2)).toEqual(['payload', 'a']);
      expect(good.status, good.text).toBe(201);
      expect(Date.now() - t).toBeLessThan(5_000);
    }
    expect(await events(a)).toBe(0);
    expect(await events(b)).toBe(2);
    expect(await s.deps.queues.ledger.getFailedCount()).toBe(0);
  });

  it('accepts a payload exactly at the limit', async () => {
    // The body's own object and "payload" take one level: the payload may nest 63 more.
    const r = await s.request('POST', '/v1/events', { auth: a, body: `{"event_type":"deep.ok","payload":${deepJson(63)}}` });
    expect(r.status, r.text).toBe(201);
  });

  it('refuses deep GraphQL variables on POST /graphql, GET /graphql and the graphql-sse endpoint', async () => {
    const query = 'mutation ($p: JSON!) { createEvent(eventType: "deep.g", payload: $p) { id } }';
    const post = await s.request('POST', '/graphql', {
      auth: a,
      body: `{"query":${JSON.stringify(query)},"variables":{"p":${deepJson(5_000)}}}`,
    });
    expect(post.text).toContain('VALIDATION_ERROR');
    const get = await fetch(
      `${s.base}/graphql?query=${encodeURIComponent('query ($p: JSON) { __typename }')}&variables=${encodeURIComponent(`{"p":${deepJson(200)}}`)}`,
      { headers: a.headers },
    );
    expect(await get.text()).toContain('VALIDATION_ERROR');
    const sse = await fetch(`${s.base}/`, {
      method: 'POST',
      headers: { ...a.headers, 'Content-Type': 'application/json', Accept: 'text/event-stream' },
      body: `{"query":${JSON.stringify(query)},"variables":{"p":${deepJson(200)}}}`,
    });
    expect(sse.status).toBe(400);
    expect(await sse.text()).toContain('VALIDATION_ERROR');
    expect(await events(a)).toBe(1);
  });
});

describe('in platform deliveries (acknowledged, then recorded)', () => {
  let s: TestStack;
  let a: AppCredentials;
  beforeAll(async () => {
    s = await startTestStack({ workers: ['inbound', 'ledger'] });
    a = await s.createApp();
  });
  afterAll(() => s?.close());

  /** A delivery whose "__DEEP__" string is replaced by a value nested 20,000 deep. */
  const withDeep = (payload: object) => JSON.stringify(payload).replace('"__DEEP__"', deepJson(20_000));

  it('records a Telegram contact whose vcard is nested 20,000 deep, the deep part as a marker', async () => {
    const tg = await connect(s, a, 'TELEGRAM', { bot_token: '424243:deep-bot-token' });
    const update = P.tgText(9001, 901, 'x');
    const message = {
      ...(update.message as Record<string, unknown>),
      text: undefined,
      contact: { phone_number: '+15550001', first_name: 'Deep', vcard: '__DEEP__' },
    };
    const r = await postWebhook(s, tg.path, withDeep({ update_id: 9001, message }), telegramHeaders());
    expect(r.status).toBe(200);
    const event = await waitForEvent(s, a.appId, 'message.inbound', (e) => e.payload.external_message_id === `${P.tgChat.id}:901`, 20_000);
    expect(event.payload.message.contact).toMatchObject({ phone_number: '+15550001', first_name: 'Deep' });
    expect(JSON.stringify(event.payload.message.contact.vcard)).toContain(TOO_DEEP);
  });

  it('records Slack, Messenger and e-mail messages carrying a part nested 20,000 deep', async () => {
    const slack = await connect(s, a, 'SLACK', { bot_token: 'xoxb-deep', signing_secret: 'deep-ss' });
    const fb = await connect(s, a, 'MESSENGER', {
      page_access_token: 't',
      page_id: '5300000001',
      app_secret: 'fb-deep',
      verify_token: 'v',
    });
    const mail = await connect(s, a, 'EMAIL', {
      smtp_url: 'smtp://127.0.0.1:1',
      from: 'deep@example.com',
      inbound_secret: 'mail-secret-deep-0123456789',
    });

    const slackBody = withDeep(P.slackMessage('EvDeep', 'C7', 'U7', '1700000007.000100', 'deep', { blocks: ['__DEEP__'] }));
    expect((await postWebhook(s, slack.path, slackBody, slackHeaders('deep-ss', slackBody))).status).toBe(200);
    const fbBody = withDeep(
      P.fbEnvelope('page', '5300000001', [
        {
          sender: { id: 'PSID-D' },
          recipient: { id: '5300000001' },
          timestamp: Date.now(),
          message: { mid: 'm_deep', text: 'deep', quick_reply: { payload: '__DEEP__' } },
        },
      ]),
    );
    expect((await postWebhook(s, fb.path, fbBody, metaHeaders('fb-deep', fbBody))).status).toBe(200);
    const mailBody = withDeep(P.email('deep@mail', 'f@example.org', 'deep', { headers: { 'x-deep': '__DEEP__' } }));
    expect((await postWebhook(s, mail.path, mailBody, emailHeaders('mail-secret-deep-0123456789', mailBody))).status).toBe(200);

    for (const id of ['C7:1700000007.000100', 'm_deep', '<deep@mail>']) {
      const event = await waitForEvent(s, a.appId, 'message.inbound', (e) => e.payload.external_message_id === id, 20_000);
      expect(event.payload.message.text, id).toBe('deep');
    }
    expect(await s.deps.queues.inbound.getFailedCount()).toBe(0);
  });
});

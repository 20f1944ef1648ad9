import { queueFor } from '../../src/queues.js';
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
    expect(await queueFor(s.deps.queues, 'ledger').getFailedCount()).toBe(0);
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

  /** A GraphQL object literal nested `depth` levels: `{a: {a: … 1 …}}`. */
  const deepLiteral = (depth: number) => `${'{a: '.repeat(depth)}1${'}'.repeat(depth)}`;
  const graphqlEvent = (eventType: string, payload: string) =>
    `mutation { createEvent(eventType: ${JSON.stringify(eventType)}, payload: ${payload}) { id } }`;
  /** The same document on POST /graphql and on the graphql-sse endpoint: status and first error. */
  async function bothEndpoints(app: AppCredentials, query: string) {
    const http = await s.request('POST', '/graphql', { auth: app, body: { query } });
    const sse = await fetch(`${s.base}/`, {
      method: 'POST',
      headers: { ...app.headers, 'Content-Type': 'application/json', Accept: 'text/event-stream' },
      body: JSON.stringify({ query }),
    });
    const sseText = await sse.text();
    return [
      { status: http.status, error: http.json.errors?.[0], text: http.text },
      { status: sse.status, error: sse.status === 400 ? JSON.parse(sseText).errors?.[0] : undefined, text: sseText },
    ];
  }

  it('refuses a GraphQL inline literal nested 100 deep on both endpoints, as REST and variables do, and takes one at the limit', async () => {
    const before = await events(a);
    for (const answer of await bothEndpoints(a, graphqlEvent('deep.literal', deepLiteral(100)))) {
      expect(answer.status, answer.text).toBe(400);
      expect(answer.error).toMatchObject({
        message: expect.stringMatching(/nested deeper than 64/),
        extensions: { code: 'VALIDATION_ERROR' },
      });
      // Counted from the argument as from a REST body's field: the same path as `{"payload": …}`.
      expect(answer.error.extensions.path).toEqual(['payload', ...Array(63).fill('a')]);
    }
    const deepDefault = await s.gql(
      a,
      `mutation ($p: JSON = ${deepLiteral(100)}) { createEvent(eventType: "deep.literal", payload: $p) { id } }`,
    );
    expect(deepDefault.status).toBe(400);
    expect(deepDefault.json.errors[0].extensions).toMatchObject({ code: 'VALIDATION_ERROR', path: ['p', ...Array(63).fill('a')] });
    expect(await events(a)).toBe(before);

    const atLimit = await s.gql(a, graphqlEvent('deep.literal', deepLiteral(63)));
    expect(atLimit.status, atLimit.text).toBe(200);
    expect(atLimit.json.errors).toBeUndefined();
    expect(await events(a)).toBe(before + 1);
  });

  it('refuses NUL and unpaired surrogates in GraphQL literals however deep they sit, and a document past the body limit', async () => {
    const before = await events(a);
    for (const answer of await bothEndpoints(a, graphqlEvent('nul.literal', '{list: ["ok", {note: "a\\u0000b"}]}'))) {
      expect(answer.status, answer.text).toBe(400);
      expect(answer.error.extensions).toMatchObject({ code: 'VALIDATION_ERROR', path: ['payload', 'list', 1, 'note'] });
    }
    // GraphQL's own lexer refuses an unpaired surrogate escape; one written raw is refused with the body's text.
    for (const answer of await bothEndpoints(a, graphqlEvent('nul.literal', '{note: "x\\ud800"}'))) expect(answer.status).toBe(400);
    for (const answer of await bothEndpoints(a, graphqlEvent('nul.literal', '{note: "x\ud800"}'))) {
      expect(answer.status, answer.text).toBe(400);
      expect(answer.text).toContain('VALIDATION_ERROR');
    }
    expect(await events(a)).toBe(before);
    // A literal is part of the document, and the document part of the body: the body limit is its size limit.
    const huge = await s.gql(a, graphqlEvent('big.literal', `{note: "${'x'.repeat(s.config.BODY_LIMIT_BYTES)}"}`));
    expect(huge.status).toBe(413);
    expect(huge.json.error.code).toBe('PAYLOAD_TOO_LARGE');
  });
});

/**
 * A JSON number past the double range parses as Infinity, and JSON has no value for it:
 * `{"payload":{"n":1e400}}` used to be answered 201 and stored as `{"n":null}`. Every client
 * entrance now refuses it with 400 VALIDATION_ERROR naming where.
 */
describe('numbers JSON cannot hold', () => {
  let s: TestStack;
  let a: AppCredentials;
  beforeAll(async () => {
    s = await startTestStack({ workers: ['ledger'] });
    a = await s.createApp();
  });
  afterAll(() => s?.close());

  const events = async () => (await s.deps.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE app_id = ${a.appId}`)[0].n;
  /** Code and path of the first error, in the REST shape (a body refused at the door) or the GraphQL one. */
  const errorOf = (text: string) => {
    const { error, errors } = JSON.parse(text);
    return error
      ? { code: error.code, path: error.details?.[0]?.path }
      : { code: errors?.[0]?.extensions?.code, path: errors?.[0]?.extensions?.path };
  };

  it('finds them at their path, and records them as null where input is kept anyway', () => {
    expect(findUnstorable({ a: [1, { n: Number.POSITIVE_INFINITY }] })).toEqual({ path: ['a', 1, 'n'], problem: 'number' });
    expect(findUnstorable({ n: Number.NaN })).toEqual({ path: ['n'], problem: 'number' });
    expect(findUnstorable({ n: 1.7976931348623157e308, m: -0 })).toBeUndefined();
    expect(storableText({ n: Number.NEGATIVE_INFINITY, ok: 2 })).toEqual({ n: null, ok: 2 });
  });

  it('refuses 1e400 and -1e400 in a REST body with 400 VALIDATION_ERROR naming the path, storing nothing', async () => {
    for (const n of ['1e400', '-1e400']) {
      const r = await s.request('POST', '/v1/events', { auth: a, body: `{"event_type":"big.n","payload":{"ok":1,"n":${n}}}` });
      expect(r.status, r.text).toBe(400);
      expect(r.json.error).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ path: ['payload', 'n'] }] });
    }
    const list = await s.request('POST', '/v1/events', { auth: a, body: '{"event_type":"big.n","payload":{"xs":[1,2,1e999]}}' });
    expect(list.json.error).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ path: ['payload', 'xs', 2] }] });
    expect(await events()).toBe(0);
  });

  it('refuses them in GraphQL variables (POST, GET, graphql-sse) and inline literals, on both endpoints', async () => {
    const withVariable = 'mutation ($p: JSON!) { createEvent(eventType: "big.n", payload: $p) { id } }';
    const answers: { status: number; text: string; path: unknown[] }[] = [];
    for (const [url, accept] of [
      ['/graphql', 'application/json'],
      ['/', 'text/event-stream'],
    ]) {
      const post = (body: string) =>
        fetch(`${s.base}${url}`, { method: 'POST', headers: { ...a.headers, 'Content-Type': 'application/json', Accept: accept }, body });
      for (const n of ['1e400', '-1e400']) {
        const v = await post(`{"query":${JSON.stringify(withVariable)},"variables":{"p":{"n":${n}}}}`);
        answers.push({ status: v.status, text: await v.text(), path: ['variables', 'p', 'n'] });
        const literal = await post(
          JSON.stringify({ query: `mutation { createEvent(eventType: "big.n", payload: {ok: 1, n: ${n}}) { id } }` }),
        );
        answers.push({ status: literal.status, text: await literal.text(), path: ['payload', 'n'] });
      }
      // An integer literal too long for a double is Infinity as well.
      const long = await post(
        JSON.stringify({ query: `mutation { createEvent(eventType: "big.n", payload: {n: [${'9'.repeat(400)}]}) { id } }` }),
      );
      answers.push({ status: long.status, text: await long.text(), path: ['payload', 'n', 0] });
    }
    const get = await fetch(
      `${s.base}/graphql?query=${encodeURIComponent('query ($p: JSON) { __typename }')}&variables=${encodeURIComponent('{"p":{"n":1e400}}')}`,
      { headers: a.headers },
    );
    answers.push({ status: get.status, text: await get.text(), path: ['variables', 'p', 'n'] });
    for (const answer of answers) {
      expect(answer.status, answer.text).toBe(400);
      expect(errorOf(answer.text), answer.text).toMatchObject({ code: 'VALIDATION_ERROR', path: answer.path });
    }
    expect(await events()).toBe(0);
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

  /** A Telegram contact message as raw JSON, `"__RAW__"` in `contact` replaced by `raw`, and the event recorded from it. */
  async function telegramContact(botToken: string, id: number, contact: Record<string, unknown>, raw: string) {
    const tg = await connect(s, a, 'TELEGRAM', { bot_token: botToken });
    const message = { ...(P.tgText(id, id, 'x').message as Record<string, unknown>), text: undefined, contact };
    const body = JSON.stringify({ update_id: id, message }).replace('"__RAW__"', raw);
    const r = await postWebhook(s, tg.path, body, telegramHeaders());
    expect(r.status).toBe(200);
    return waitForEvent(s, a.appId, 'message.inbound', (e) => e.payload.external_message_id === `${P.tgChat.id}:${id}`, 20_000);
  }

  it('records a Telegram contact whose vcard is nested 20,000 deep, the deep part as a marker', async () => {
    const contact = { phone_number: '+15550001', first_name: 'Deep', vcard: '__RAW__' };
    const event = await telegramContact('424243:deep-bot-token', 9001, contact, deepJson(20_000));
    expect(event.payload.message.contact).toMatchObject({ phone_number: '+15550001', first_name: 'Deep' });
    expect(JSON.stringify(event.payload.message.contact.vcard)).toContain(TOO_DEEP);
  });

  it('records a delivery carrying a number JSON cannot hold (1e400), that number as null', async () => {
    const contact = { phone_number: '+15550002', first_name: 'Big', user_id: '__RAW__' };
    const event = await telegramContact('424244:big-number-token', 9002, contact, '1e400');
    expect(event.payload.message.contact).toMatchObject({ phone_number: '+15550002', first_name: 'Big', user_id: null });
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
    expect(await queueFor(s.deps.queues, 'inbound').getFailedCount()).toBe(0);
  });
});

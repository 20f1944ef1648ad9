import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeps, closeDeps, type Deps } from '../../src/deps.js';
import { startWeb, type WebServer } from '../../src/web.js';
import * as P from '../fakes/inbound/payloads.js';
import { metaHeaders, telegramHeaders } from '../fakes/inbound/signers.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { connect } from './helpers.js';

// Two web processes on one database and Redis prefix: connections are changed through A while
// B has them cached. The cache entries outlive the test by far, so only the announcement of the
// change can make B notice it.
const CACHE_MS = 600_000;
const NOTICED_WITHIN_MS = 3_000;

let s: TestStack;
let app: AppCredentials;
let depsB: Deps;
let webB: WebServer;
let baseB: string;

beforeAll(async () => {
  s = await startTestStack({ workers: false, env: { INBOUND_LOOKUP_CACHE_MS: String(CACHE_MS) } });
  app = await s.createApp();
  depsB = createDeps(s.config);
  webB = await startWeb(depsB, 0);
  baseB = `http://127.0.0.1:${webB.port}`;
});
afterAll(async () => {
  await webB?.close();
  if (depsB) await closeDeps(depsB);
  await s?.close();
});

const postB = async (path: string, body: string, headers: Record<string, string>) =>
  (await fetch(baseB + path, { method: 'POST', headers, body })).status;
const patch = async (id: string, body: unknown) =>
  expect((await s.request('PATCH', `/v1/platform-connections/${id}`, { auth: app, body })).status).toBe(200);

describe('a connection changed in one process takes effect in the others at once', () => {
  it('a new Telegram secret token: the old one is refused and the new one accepted', async () => {
    const tg = await connect(s, app, 'TELEGRAM', { bot_token: '1:a', secret_token: 'old-token' });
    let n = 1;
    expect(await postB(tg.path, JSON.stringify(P.tgText(n, n++, 'cached')), telegramHeaders('old-token'))).toBe(200);
    await patch(tg.id, { config: { secret_token: 'new-token' } });
    await expect
      .poll(() => postB(tg.path, JSON.stringify(P.tgText(n, n++, 'stale')), telegramHeaders('old-token')), {
        timeout: NOTICED_WITHIN_MS,
        interval: 20,
      })
      .toBe(401);
    expect(await postB(tg.path, JSON.stringify(P.tgText(n, n++, 'fresh')), telegramHeaders('new-token'))).toBe(200);
  });

  it('a disabled connection answers 410, and 200 again once re-enabled', async () => {
    const tg = await connect(s, app, 'TELEGRAM', { bot_token: '2:b' });
    let n = 100;
    expect(await postB(tg.path, JSON.stringify(P.tgText(n, n++, 'cached')), telegramHeaders())).toBe(200);
    await patch(tg.id, { status: 'DISABLED' });
    await expect
      .poll(() => postB(tg.path, JSON.stringify(P.tgText(n, n++, 'disabled')), telegramHeaders()), {
        timeout: NOTICED_WITHIN_MS,
        interval: 20,
      })
      .toBe(410);
    await patch(tg.id, { status: 'ACTIVE' });
    await expect
      .poll(() => postB(tg.path, JSON.stringify(P.tgText(n, n++, 'enabled')), telegramHeaders()), {
        timeout: NOTICED_WITHIN_MS,
        interval: 20,
      })
      .toBe(200);
  });

  it('a deleted connection is unknown', async () => {
    const tg = await connect(s, app, 'TELEGRAM', { bot_token: '3:c' });
    let n = 200;
    expect(await postB(tg.path, JSON.stringify(P.tgText(n, n++, 'cached')), telegramHeaders())).toBe(200);
    expect((await s.request('DELETE', `/v1/platform-connections/${tg.id}`, { auth: app })).status).toBe(204);
    await expect
      .poll(() => postB(tg.path, JSON.stringify(P.tgText(n, n++, 'deleted')), telegramHeaders()), {
        timeout: NOTICED_WITHIN_MS,
        interval: 20,
      })
      .toBe(401);
  });

  it('a new WhatsApp app secret on the shared URL: payloads signed with the old one are refused', async () => {
    const wa = await connect(s, app, 'WHATSAPP', {
      access_token: 't',
      phone_number_id: '1065559999',
      business_account_id: '2065559999',
      app_secret: 'old-secret',
      verify_token: 'v',
    });
    let n = 0;
    const body = () => JSON.stringify(P.waText('2065559999', '1065559999', '16505550000', `wamid.change${n++}`, 'hi'));
    const signed = (secret: string) => {
      const b = body();
      return postB(wa.path, b, metaHeaders(secret, b));
    };
    expect(await signed('old-secret')).toBe(200);
    await patch(wa.id, { config: { app_secret: 'new-secret' } });
    await expect.poll(() => signed('old-secret'), { timeout: NOTICED_WITHIN_MS, interval: 20 }).toBe(401);
    expect(await signed('new-secret')).toBe(200);
  });
});

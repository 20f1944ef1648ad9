import type postgres from 'postgres';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { startWeb, type WebServer } from '../../src/web.js';
import { TelegramFake } from '../fakes/telegram.js';
import { connect } from '../helpers/connections.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { apiFetch } from '../helpers/openapi-contract.js';

// The send path keeps each connection per process (web and send worker), cleared by the
// `connections` change feed. The cache entries outlive the test by far, so only the
// announcement of a change can make a process load the connection again.
const CACHE_MS = '600000';

let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;
let tg: TelegramFake;
let tg2: TelegramFake;
// A second web process on the same database and Redis prefix, with its own cache.
let depsB: Deps;
let webB: WebServer;

/**
 * SELECTs on platform_connections, counted with postgres.js's own `debug` hook: the driver
 * calls it for every statement it sends to the server, from every pool connection. The web and
 * the send worker of the stack share this pool, so every connection load of either is seen.
 */
let connectionSelects = 0;
const countConnectionSelects = (sql: Deps['sql']) => {
  (sql as unknown as { options: postgres.Options<Record<string, never>> }).options.debug = (_conn, query) => {
    if (/^\s*SELECT\b[\s\S]*\bFROM platform_connections\b/i.test(query)) connectionSelects++;
  };
};

beforeAll(async () => {
  [tg, tg2] = await Promise.all([TelegramFake.start(), TelegramFake.start()]);
  s = await startTestStack({ workers: ['ledger', 'send'], env: { CONNECTION_CACHE_MS: CACHE_MS } });
  depsB = createDeps(s.config);
  webB = await startWeb(depsB, 0);
  // Subscribed before anything is cached: the feed clears everything once it is subscribed.
  await Promise.all([s.web.services.connections.ready, s.workers!.services.connections.ready, webB.services.connections.ready]);
  a = await s.createApp();
  b = await s.createApp();
  countConnectionSelects(s.deps.sql);
});
afterAll(async () => {
  await webB?.close();
  if (depsB) await closeDeps(depsB);
  await s?.close();
  await Promise.all([tg?.close(), tg2?.close()]);
});
beforeEach(() => {
  tg.reset();
  tg2.reset();
});

const sendVia = (base: string, auth: AppCredentials, connectionId: string, to: string) =>
  apiFetch(`${base}/v1/messages`, {
    method: 'POST',
    headers: { ...auth.headers, 'Content-Type': 'application/json' },
    body: JSON.stringify({ platform_connection_id: connectionId, to_external_id: to, message: `to ${to}` }),
  }).then(async (r) => ({ status: r.status, json: await r.json() }));
const send = (auth: AppCredentials, connectionId: string, to: string) => sendVia(s.base, auth, connectionId, to);
const sendB = (auth: AppCredentials, connectionId: string, to: string) => sendVia(`http://127.0.0.1:${webB.port}`, auth, connectionId, to);
const patch = async (id: string, body: unknown) =>
  expect((await s.request('PATCH', `/v1/platform-connections/${id}`, { auth: a, body })).status).toBe(200);

/** The connection SELECTs `fn` caused. */
const selectsDuring = async (fn: () => Promise<unknown>) => {
  const before = connectionSelects;
  await fn();
  return connectionSelects - before;
};

describe('the send path loads a connection once per process', () => {
  it('two sends through one connection: loaded once by the web and once by the worker, not per send', async () => {
    const conn = await connect(s, a, 'TELEGRAM', { bot_token: '810001:first', api_base_url: tg.url });
    const first = await selectsDuring(async () => expect((await send(a, conn.id, '1')).status).toBe(201));
    const second = await selectsDuring(async () => expect((await send(a, conn.id, '2')).status).toBe(201));
    // Without the cache each send loads it twice (web and worker): 2 and 2.
    expect([first, second]).toEqual([2, 0]);
    expect(tg.server.requests.map((r) => r.json.chat_id)).toEqual(['1', '2']);
  });
});

describe('a changed connection is seen by the very next send, in every process', () => {
  it('a new bot token and api_base_url: the worker calls the new platform with the new token', async () => {
    const conn = await connect(s, a, 'TELEGRAM', { bot_token: '820001:old', api_base_url: tg.url });
    expect((await send(a, conn.id, '1')).status).toBe(201);
    expect(tg.server.requests.map((r) => r.path)).toEqual(['/bot820001:old/sendMessage']);

    await patch(conn.id, { config: { bot_token: '820001:new', api_base_url: tg2.url } });
    // Both caches were cleared: the web and the worker each load the connection again.
    const selects = await selectsDuring(async () => expect((await send(a, conn.id, '2')).status).toBe(201));
    expect(selects).toBe(2);
    expect(tg.server.requests).toHaveLength(1);
    expect(tg2.server.requests.map((r) => r.path)).toEqual(['/bot820001:new/sendMessage']);
  });

  it('a disabled connection is refused by a web process that had it cached, and accepted again once re-enabled', async () => {
    const conn = await connect(s, a, 'TELEGRAM', { bot_token: '830001:t', api_base_url: tg.url });
    expect((await sendB(a, conn.id, '1')).status).toBe(201);
    await patch(conn.id, { status: 'DISABLED' });
    const refused = await sendB(a, conn.id, '2');
    expect(refused.status).toBe(422);
    expect(refused.json.error.code).toBe('CONNECTION_DISABLED');
    expect((await send(a, conn.id, '3')).status).toBe(422);

    await patch(conn.id, { status: 'ACTIVE' });
    expect((await sendB(a, conn.id, '4')).status).toBe(201);
    expect(tg.server.requests.map((r) => r.json.chat_id)).toEqual(['1', '4']);
  });

  it('a deleted connection is unknown to a web process that had it cached', async () => {
    const conn = await connect(s, a, 'TELEGRAM', { bot_token: '840001:t', api_base_url: tg.url });
    expect((await sendB(a, conn.id, '1')).status).toBe(201);
    expect((await s.request('DELETE', `/v1/platform-connections/${conn.id}`, { auth: a })).status).toBe(204);
    const refused = await sendB(a, conn.id, '2');
    expect(refused.status).toBe(404);
    expect(refused.json.error.code).toBe('PLATFORM_CONNECTION_NOT_FOUND');
    expect(tg.server.requests).toHaveLength(1);
  });
});

describe('when an announcement is lost', () => {
  it('a connection deleted behind a web process that has it cached is still answered 404, never 500', async () => {
    const conn = await connect(s, a, 'TELEGRAM', { bot_token: '860001:t', api_base_url: tg.url });
    expect((await send(a, conn.id, '1')).status).toBe(201);
    // Deleted without announcing it: the web's entry is stale until CONNECTION_CACHE_MS.
    await s.deps.sql`DELETE FROM platform_connections WHERE id = ${conn.id}`;
    expect((await s.web.services.connections.get(a.appId, conn.id))?.id).toBe(conn.id);
    const refused = await send(a, conn.id, '2');
    expect(refused.status).toBe(404);
    expect(refused.json.error.code).toBe('PLATFORM_CONNECTION_NOT_FOUND');
    expect(tg.server.requests).toHaveLength(1);
  });
});

describe('a cached connection belongs to its application', () => {
  it('another application naming a connection the web has cached gets 404, and the cache gives it nothing', async () => {
    const conn = await connect(s, a, 'TELEGRAM', { bot_token: '850001:t', api_base_url: tg.url });
    expect((await send(a, conn.id, '1')).status).toBe(201);
    const r = await send(b, conn.id, '2');
    expect(r.status).toBe(404);
    expect(r.json.error.code).toBe('PLATFORM_CONNECTION_NOT_FOUND');
    for (const cache of [s.web.services.connections, s.workers!.services.connections]) {
      expect((await cache.get(a.appId, conn.id))?.id).toBe(conn.id);
      expect(await cache.get(b.appId, conn.id)).toBeUndefined();
    }
    expect(tg.server.requests).toHaveLength(1);
  });
});

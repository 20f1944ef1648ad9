import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { SCOPES } from '../../src/auth/scopes.js';
import { createSql, type Sql } from '../../src/db.js';
import { shardOf } from '../../src/queues.js';
import { createRedis } from '../../src/redis.js';
import { TelegramFake } from '../fakes/telegram.js';
import { tgText } from '../fakes/inbound/payloads.js';
import { telegramHeaders } from '../fakes/inbound/signers.js';
import { eventually } from '../helpers/connections.js';
import { apiFetch } from '../helpers/openapi-contract.js';
import { startRedisCluster, type RedisCluster } from '../helpers/redis-cluster.js';
import { openSse } from '../helpers/sse.js';
import { createTestEnv, freePort, spawnService, type AppCredentials, type ChildService, type TestEnv } from '../helpers/stack.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';

/**
 * The core flows on a real Redis Cluster of 3 masters + 3 replicas with QUEUE_SHARDS=6, the
 * service as separate web and worker processes (development mode): every flow that touches
 * Redis — the ledger queue, stream wakes, webhook fan-out, send budgets, inbound dedup — must
 * run without a CROSSSLOT, MOVED or ASK reaching a caller (no 5xx, nothing in the logs), and
 * the applications' shards must put keys on every master.
 */
let cluster: RedisCluster;
let t: TestEnv;
let sql: Sql;
let tg: TelegramFake;
let rx: Receiver;
let base: string;
const procs: ChildService[] = [];
/** Every status the service answered this file, with the request that got it. */
const answered: { what: string; status: number }[] = [];

beforeAll(async () => {
  [cluster, t, tg, rx] = await Promise.all([
    startRedisCluster(),
    createTestEnv({ LOG_LEVEL: 'info' }),
    TelegramFake.start(),
    startReceiver(),
  ]);
  const { NODE_ENV: _test, ...development } = t.env;
  const env = {
    ...development,
    REDIS_CLUSTER_NODES: cluster.seeds,
    REDIS_PREFIX: `{t${randomBytes(4).toString('hex')}}`,
    QUEUE_SHARDS: '6',
    OUTBOUND_ADDRESS_POLICY: 'any',
    RATE_LIMIT_PER_MINUTE: '100000',
    // The shortest lease: the stream slot is renewed every 100 ms while the flows below run.
    STREAM_SLOT_LEASE_MS: '300',
  };
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  procs.push(spawnService('workers/index.ts', env), spawnService('src/web.ts', { ...env, PORT: String(port) }));
  await Promise.all([procs[0].waitFor(/workers started/), procs[1].waitFor(/web listening/)]);
  sql = createSql(t.env.DATABASE_URL, { max: 2 });
}, 60_000);
afterAll(async () => {
  for (const p of procs) p.kill('SIGKILL');
  await Promise.all(procs.map((p) => p.exited));
  await sql?.end();
  await Promise.all([tg?.close(), rx?.close()]);
  await t?.dropDatabase();
  await cluster?.destroy();
});

async function newApp(): Promise<AppCredentials> {
  const a = await createApplication(sql, `cluster-${randomBytes(3).toString('hex')}`, [...SCOPES]);
  return {
    appId: a.appId,
    apiKey: a.apiKey,
    keyId: a.keyId,
    headers: { Authorization: `Bearer ${a.apiKey}`, 'X-Service-App-ID': a.appId },
  };
}

/** A JSON request at the web process (checked against the OpenAPI document), every status kept. */
async function call(method: string, path: string, auth: AppCredentials, body?: unknown) {
  const r = await apiFetch(base + path, {
    method,
    headers: { ...auth.headers, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  answered.push({ what: `${method} ${path}`, status: r.status });
  const text = await r.text();
  return { status: r.status, text, json: text ? JSON.parse(text) : undefined };
}

const emit = async (a: AppCredentials, eventType: string, payload: Record<string, unknown> = {}) => {
  const r = await call('POST', '/v1/events', a, { event_type: eventType, payload });
  expect(r.status, r.text).toBe(201);
  return r.json as { id: string; cursor: string };
};

describe('core flows on a 3-master + 3-replica Redis Cluster with QUEUE_SHARDS=6', () => {
  it('event 201, cursor page, SSE, signed webhook, Telegram send and inbound: keys on every master, no redirection or cross-slot error reaching anyone', async () => {
    const a = await newApp();

    // Webhook subscription first, so the events below fan out to it (throttled: the throttle's script runs too).
    const sub = await call('POST', '/v1/webhook-subscriptions', a, {
      name: 'hook',
      target_url: rx.url,
      event_patterns: ['order.*'],
      max_per_second: 100,
    });
    expect(sub.status, sub.text).toBe(201);

    // SSE: a client connected before the event sees it arrive; it stays open (its slot lease
    // renewed) until the other flows are done.
    const stream = await openSse(`${base}/events/stream?eventTypes=order.placed`, { headers: a.headers });
    expect(stream.status, stream.text).toBe(200);

    const first = await emit(a, 'order.placed', { n: 1 });
    const frame = await stream.next(15_000);
    expect(JSON.parse(frame!.data!)).toMatchObject({ id: first.id, eventType: 'order.placed' });

    // Cursor page: what follows the first event's cursor, and nothing before it.
    const second = await emit(a, 'order.shipped', { n: 2 });
    const page = await call('GET', `/v1/events?after=${encodeURIComponent(first.cursor)}`, a);
    expect(page.status, page.text).toBe(200);
    expect(page.json.data.map((e: { id: string }) => e.id)).toEqual([second.id]);

    // Signed webhook delivery of both events to the local receiver.
    const got = await rx.waitFor(2, () => true, 20_000);
    const secret = sub.json.secret as string;
    for (const d of got) expect(new Webhook(secret).verify(d.body, d.headers as Record<string, string>)).toEqual(d.json);
    expect(got.map((d) => d.json.event_id).sort()).toEqual([first.id, second.id].sort());

    // A send through a Telegram connection whose API is the fake.
    const conn = await call('POST', '/v1/platform-connections', a, {
      platform_name: 'TELEGRAM',
      name: 'tg',
      config: { bot_token: '777001:cluster-bot-token', secret_token: 'tg-cluster-secret', api_base_url: tg.url },
    });
    expect(conn.status, conn.text).toBe(201);
    const sent = await call('POST', '/v1/messages', a, {
      platform_connection_id: conn.json.id,
      to_external_id: '4242',
      message: 'hello cluster',
    });
    expect(sent.status, sent.text).toBe(201);
    expect(sent.json).toMatchObject({ status: 'sent' });
    expect(tg.server.requests.map((r) => r.json)).toEqual([{ chat_id: '4242', text: 'hello cluster' }]);

    // An inbound update at the connection's webhook URL, with its secret token.
    const hookPath = new URL(conn.json.webhook_url as string).pathname;
    const inbound = await fetch(base + hookPath, {
      method: 'POST',
      headers: telegramHeaders('tg-cluster-secret'),
      body: JSON.stringify(tgText(9001, 77, 'hi from telegram')),
    });
    answered.push({ what: `POST ${hookPath}`, status: inbound.status });
    expect(inbound.status, await inbound.text()).toBe(200);
    await eventually(
      async () => {
        const r = await call('GET', '/v1/events?event_type=message.inbound', a);
        return r.json.data.find((e: { payload: { message: { text: string } } }) => e.payload.message.text === 'hi from telegram');
      },
      20_000,
      'the inbound update in the ledger',
    );

    stream.close();

    // More applications until their shards cover all six, one event each: every master holds keys.
    const apps = [a];
    while (new Set(apps.map((x) => shardOf(x.appId, 6))).size < 6) apps.push(await newApp());
    for (const x of apps.slice(1)) await emit(x, 'cluster.shard');
    const sizes = await Promise.all(
      (await cluster.masters()).map(async (m) => {
        const c = createRedis(m.url, 'blocking');
        try {
          return await c.dbsize();
        } finally {
          c.disconnect();
        }
      }),
    );
    expect(sizes).toHaveLength(3);
    for (const n of sizes) expect(n).toBeGreaterThan(0);

    expect(answered.filter((x) => x.status >= 500)).toEqual([]);
    // Redis's own refusals, and ioredis's: a pipeline over several slots is refused in the client,
    // and redirections it cannot follow end as "Too many Cluster redirections".
    for (const p of procs)
      expect(p.output()).not.toMatch(/CROSSSLOT|MOVED|\bASK\b|should belong to the same slot|Too many Cluster redirections/);
  }, 120_000);
});

import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { parseConfig } from '../../src/config.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { createLogger } from '../../src/logger.js';
import { startWeb, type WebServer } from '../../src/web.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { PG_HOST, PG_PORT } from '../helpers/servers.js';
import { createTestEnv, freePort, type TestEnv } from '../helpers/stack.js';
import { apiFetch } from '../helpers/openapi-contract.js';

// Readiness is tested against backing services the test can take away: its own redis-server
// on a free port, and the shared PostgreSQL reached through a TCP relay the test can cut.

/** A TCP relay to PostgreSQL; `cut()` drops every connection and refuses new ones, `restore()` undoes it. */
class Relay {
  private server?: Server;
  private sockets = new Set<Socket>();
  constructor(readonly port: number) {}
  async restore(): Promise<void> {
    this.server = createServer((client) => {
      const upstream = connect(PG_PORT, PG_HOST);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => {});
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((r) => this.server!.listen(this.port, '127.0.0.1', r));
  }
  async cut(): Promise<void> {
    const closed = new Promise((r) => this.server?.close(r));
    for (const s of this.sockets) s.destroy();
    await closed;
  }
}

let t: TestEnv;
let deps: Deps;
let web: WebServer;
let base: string;
let redis: RedisServer;
let relay: Relay;

beforeAll(async () => {
  redis = await startRedisServer();
  t = await createTestEnv({ REDIS_URL: redis.url });
  relay = new Relay(await freePort());
  await relay.restore();
  const dbUrl = new URL(t.env.DATABASE_URL);
  dbUrl.port = String(relay.port);
  deps = createDeps(parseConfig({ ...t.env, DATABASE_URL: dbUrl.toString() }), { logger: createLogger('silent') });
  web = await startWeb(deps, 0);
  base = `http://127.0.0.1:${web.port}`;
});
afterAll(async () => {
  await web.close();
  await closeDeps(deps);
  await relay.cut();
  await redis.destroy();
  await t.dropDatabase();
});

const get = async (path: string, headers: Record<string, string> = {}) => {
  const r = await apiFetch(base + path, { headers });
  return { status: r.status, headers: r.headers, json: await r.json().catch(() => undefined) };
};
const readyWithin = async (want: number, timeoutMs = 15_000) => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await get('/readyz');
    if (r.status === want || Date.now() > deadline) return r;
    await new Promise((res) => setTimeout(res, 100));
  }
};

describe('liveness and readiness', () => {
  it('/healthz and /readyz answer 200 when Postgres and Redis answer', async () => {
    expect(await get('/healthz')).toMatchObject({ status: 200, json: { status: 'ok' } });
    // Right after start the fail-fast Redis connection may still be connecting: readiness says so.
    expect(await readyWithin(200)).toMatchObject({ status: 200, json: { status: 'ok', postgres: 'ok', redis: 'ok' } });
  });

  it('/readyz answers 503 naming Redis while it is down (the API answers 503, not 500), and recovers', async () => {
    const app = await createApplication(deps.sql, 'ops', ['events:read']);
    const auth = { Authorization: `Bearer ${app.apiKey}`, 'X-Service-App-ID': app.appId };
    expect((await get('/v1/events', auth)).status).toBe(200);

    await redis.stop();
    const down = await readyWithin(503);
    expect(down).toMatchObject({ status: 503, json: { status: 'unavailable', postgres: 'ok', redis: 'down' } });
    expect((await get('/healthz')).status).toBe(200);
    const api = await get('/v1/events', auth);
    expect(api.status).toBe(503);
    expect(api.json.error.code).toBe('UNAVAILABLE');
    expect(api.headers.get('retry-after')).toBe('1');

    await redis.start();
    expect((await readyWithin(200)).status).toBe(200);
    expect((await get('/v1/events', auth)).status).toBe(200);
  });

  it('/readyz answers 503 naming Postgres while it is unreachable (the API answers 503, not 500), and recovers', async () => {
    const app = await createApplication(deps.sql, 'ops-pg', ['events:read']);
    const auth = { Authorization: `Bearer ${app.apiKey}`, 'X-Service-App-ID': app.appId };
    await relay.cut();
    const down = await readyWithin(503);
    expect(down).toMatchObject({ status: 503, json: { status: 'unavailable', postgres: 'down', redis: 'ok' } });
    expect((await get('/healthz')).status).toBe(200);
    const api = await get('/v1/events', auth);
    expect(api.status).toBe(503);
    expect(api.json.error.code).toBe('UNAVAILABLE');

    await relay.restore();
    expect((await readyWithin(200)).status).toBe(200);
    expect((await get('/v1/events', auth)).status).toBe(200);
  });
});

describe('API descriptions', () => {
  it('serves an OpenAPI 3.1 document with the REST routes, their scopes and the error schema', async () => {
    const r = await get('/v1/openapi.json');
    expect(r.status).toBe(200);
    expect(r.json.openapi).toBe('3.1.0');
    const post = r.json.paths['/v1/events'].post;
    expect(post['x-required-scope']).toBe('events:write');
    expect(post.requestBody.content['application/json'].schema.properties).toHaveProperty('event_type');
    expect(Object.keys(post.responses)).toEqual(expect.arrayContaining(['201', '400', '401', '403', '429']));
    expect(r.json.paths['/v1/events/{id}'].get.parameters[0]).toMatchObject({ name: 'id', in: 'path', required: true });
    expect(r.json.components.schemas.Error.properties.error.properties.code.enum).toContain('VALIDATION_ERROR');
  });

  it('serves the GraphQL schema as SDL', async () => {
    const r = await fetch(`${base}/graphql/schema.graphql`);
    expect(r.status).toBe(200);
    const sdl = await r.text();
    expect(sdl).toMatch(/type Query \{/);
    expect(sdl).toMatch(/createEvent\(/);
  });
});

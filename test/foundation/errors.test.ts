import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { createApp } from '../../src/http/app.js';
import { createTestEnv, type TestEnv } from '../helpers/stack.js';
import { createApplication } from '../../src/apps/applications.js';
import { apiFetch } from '../helpers/openapi-contract.js';

// The app is built here rather than through startTestStack so the test can add routes that
// fail the ways a real bug would, and read the log lines the service writes.
let t: TestEnv;
let deps: Deps;
let server: Server;
let base: string;
let auth: Record<string, string>;
const logLines: Record<string, unknown>[] = [];

beforeAll(async () => {
  t = await createTestEnv({ EVENT_WAIT_MS: '0' });
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const line of String(chunk).split('\n').filter(Boolean)) logLines.push(JSON.parse(line));
      cb();
    },
  });
  deps = createDeps(t.config, { logger: pino({ level: 'info' }, sink) });
  const web = createApp(deps);
  // Under an existing resource: every tag of the document must be described (src/http/openapi.ts).
  web.api.route({
    method: 'get',
    path: '/v1/platforms/test-crash',
    operationId: 'testCrash',
    summary: 'throws like a bug',
    scope: 'events:read',
    responses: {},
    async handler() {
      throw new Error('boom: SELECT secret FROM api_keys');
    },
  });
  web.api.route({
    method: 'get',
    path: '/v1/platforms/test-bad-sql',
    operationId: 'testBadSql',
    summary: 'runs broken SQL',
    scope: 'events:read',
    responses: {},
    async handler({ deps: d }) {
      await d.sql.unsafe('SELECT * FROM no_such_table_here');
      return { status: 200 };
    },
  });
  server = web.app.listen(0);
  await new Promise((r) => server.once('listening', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const app = await createApplication(deps.sql, 'errors', ['events:read', 'events:write', 'admin']);
  auth = { Authorization: `Bearer ${app.apiKey}`, 'X-Service-App-ID': app.appId };
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await closeDeps(deps);
  await t.dropDatabase();
});

async function call(method: string, path: string, init: { headers?: Record<string, string>; body?: string } = {}) {
  const r = await apiFetch(base + path, { method, headers: init.headers, body: init.body });
  const text = await r.text();
  return { status: r.status, headers: r.headers, text, json: JSON.parse(text) };
}
/** The request log binds the request (with its id) to every line logged through req.log. */
const requestIdOf = (l: Record<string, unknown>) => (l.req as { id?: string } | undefined)?.id ?? l.reqId;
const jsonHeaders = () => ({ ...auth, 'Content-Type': 'application/json' });

describe('error model', () => {
  it('answers an unknown route with a JSON 404', async () => {
    for (const [method, path] of [
      ['GET', '/nope'],
      ['POST', '/v1/nothing-here'],
      ['DELETE', '/v1/no/such/path'],
    ]) {
      const r = await call(method, path);
      expect(r.status).toBe(404);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expect(r.json).toEqual({ error: { code: 'NOT_FOUND', message: expect.stringContaining(path) } });
    }
  });

  it('answers an unknown resource id with a JSON 404', async () => {
    const r = await call('GET', '/v1/events/00000000-0000-4000-8000-000000000000', { headers: auth });
    expect(r.status).toBe(404);
    expect(r.json.error.code).toBe('NOT_FOUND');
  });

  it('answers malformed JSON with 400 INVALID_JSON', async () => {
    const r = await call('POST', '/v1/events', { headers: jsonHeaders(), body: '{"event_type": "a.b", "payload": {' });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: { code: 'INVALID_JSON', message: expect.any(String) } });
  });

  it('answers schema failures with 400 VALIDATION_ERROR and per-field details', async () => {
    const body = await call('POST', '/v1/events', { headers: jsonHeaders(), body: JSON.stringify({ event_type: 7, payload: 'x' }) });
    expect(body.status).toBe(400);
    expect(body.json.error.code).toBe('VALIDATION_ERROR');
    const paths = body.json.error.details.map((d: { path: unknown[] }) => d.path);
    expect(paths).toEqual(expect.arrayContaining([['event_type'], ['payload']]));
    for (const d of body.json.error.details) expect(d.message).toEqual(expect.any(String));
    const query = await call('GET', '/v1/events?limit=abc', { headers: auth });
    expect(query.status).toBe(400);
    expect(query.json.error.details[0].path).toEqual(['query', 'limit']);
  });

  it('answers a body over 1 MB with 413 PAYLOAD_TOO_LARGE, and lets one just under through to validation', async () => {
    expect(t.config.BODY_LIMIT_BYTES).toBe(1_048_576);
    const big = JSON.stringify({ event_type: 'a.b', payload: { blob: 'x'.repeat(1_048_576) } });
    const r = await call('POST', '/v1/events', { headers: jsonHeaders(), body: big });
    expect(r.status).toBe(413);
    expect(r.json).toEqual({ error: { code: 'PAYLOAD_TOO_LARGE', message: expect.any(String) } });
    const under = JSON.stringify({ event_type: 'NOT VALID', payload: { blob: 'x'.repeat(1_000_000) } });
    const r2 = await call('POST', '/v1/events', { headers: jsonHeaders(), body: under });
    expect(r2.status).toBe(400);
    expect(r2.json.error.code).toBe('VALIDATION_ERROR');
  });

  it('masks an unexpected error as 500 INTERNAL with no stack or SQL, and logs it with the request id', async () => {
    for (const path of ['/v1/platforms/test-crash', '/v1/platforms/test-bad-sql']) {
      const requestId = `req-${path.split('/').pop()}`;
      const r = await call('GET', path, { headers: { ...auth, 'X-Request-Id': requestId } });
      expect(r.status).toBe(500);
      expect(r.json).toEqual({ error: { code: 'INTERNAL', message: expect.any(String) } });
      expect(r.text).not.toMatch(/SELECT|no_such_table|api_keys|\bat .*\.ts/);
      expect(r.headers.get('x-request-id')).toBe(requestId);
      const logged = logLines.filter((l) => requestIdOf(l) === requestId);
      expect(logged.some((l) => l.msg === 'unhandled error' && JSON.stringify(l.err).match(/boom|no_such_table/))).toBe(true);
    }
  });

  it('puts the request id on every log line of a request', async () => {
    logLines.length = 0;
    await call('GET', '/nope', { headers: { 'X-Request-Id': 'trace-me-123' } });
    await call('GET', '/v1/events', { headers: { 'X-Request-Id': 'trace-me-456' } });
    expect(logLines.length).toBeGreaterThanOrEqual(2);
    for (const l of logLines) expect(['trace-me-123', 'trace-me-456']).toContain(requestIdOf(l));
  });

  it('logs a refused platform delivery with its request id and without the URL secret', async () => {
    logLines.length = 0;
    const id = '3f2a9c1e-0000-4000-8000-000000000001';
    const r = await fetch(`${base}/webhooks/${id}/s3cr3t-in-the-url`, {
      method: 'POST',
      headers: { 'X-Request-Id': 'delivery-1', 'Content-Type': 'application/json' },
      body: '{}',
    });
    expect(r.status).toBe(401);
    expect(r.headers.get('x-request-id')).toBe('delivery-1');
    const line = logLines.find((l) => requestIdOf(l) === 'delivery-1');
    expect(line).toMatchObject({
      msg: 'request completed',
      req: { method: 'POST', url: `/webhooks/${id}/[redacted]` },
      res: { statusCode: 401 },
    });
    expect(JSON.stringify(logLines)).not.toContain('s3cr3t-in-the-url');
  });
});

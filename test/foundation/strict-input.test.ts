import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { apiFetch } from '../helpers/openapi-contract.js';

let s: TestStack;
let a: AppCredentials;

beforeAll(async () => {
  // Every route is called several times from one application: the per-minute limit is not under test.
  s = await startTestStack({ workers: ['ledger'], env: { RATE_LIMIT_PER_MINUTE: '100000' } });
  a = await s.createApp();
});
afterAll(() => s.close());

interface Operation {
  method: string;
  path: string;
  jsonBody: boolean;
  multipart: boolean;
}

/** Every REST operation of the service's own OpenAPI document, path parameters filled with a UUID. */
async function operations(): Promise<Operation[]> {
  const doc = (await s.request('GET', '/v1/openapi.json')).json as {
    paths: Record<string, Record<string, { requestBody?: { content?: Record<string, unknown> } }>>;
  };
  return Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({
      method: method.toUpperCase(),
      path: path.replace(/\{[^}]+\}/g, '00000000-0000-4000-8000-000000000000'),
      jsonBody: Boolean(op.requestBody?.content?.['application/json']),
      multipart: Boolean(op.requestBody?.content?.['multipart/form-data']) || path === '/v1/files',
    })),
  );
}

const paths = (r: { json: { error: { details?: { path: unknown[] }[] } } }) => (r.json.error.details ?? []).map((d) => d.path);

describe('unknown fields', () => {
  it('are refused with 400 VALIDATION_ERROR naming the field, on every JSON body of the OpenAPI document', async () => {
    const ops = await operations();
    const withBody = ops.filter((o) => o.method !== 'GET' && !o.multipart);
    expect(withBody.map((o) => `${o.method} ${o.path}`)).toEqual(
      expect.arrayContaining([
        'POST /v1/events',
        'POST /v1/webhook-subscriptions',
        'PATCH /v1/webhook-subscriptions/00000000-0000-4000-8000-000000000000',
      ]),
    );
    for (const op of withBody) {
      const r = await s.request(op.method, op.path, { auth: a, body: { zz_not_a_field: 1 } });
      const context = `${op.method} ${op.path} → ${r.status} ${r.text}`;
      expect(r.status, context).toBe(400);
      expect(r.json.error.code, context).toBe('VALIDATION_ERROR');
      expect(paths(r), context).toContainEqual(['zz_not_a_field']);
    }
  });

  it('are refused in the query string of every operation, named with the query prefix', async () => {
    for (const op of await operations()) {
      const r = await s.request(op.method, `${op.path}?zz_not_a_param=1`, { auth: a });
      const context = `${op.method} ${op.path} → ${r.status} ${r.text}`;
      expect(r.status, context).toBe(400);
      expect(r.json.error.code, context).toBe('VALIDATION_ERROR');
      expect(paths(r), context).toContainEqual(['query', 'zz_not_a_param']);
    }
  });

  it('PATCH of a subscription with "secret" is refused and the subscription keeps its secret', async () => {
    const created = await s.request('POST', '/v1/webhook-subscriptions', {
      auth: a,
      body: { name: 'x', target_url: 'https://example.com/hook', event_patterns: ['*'] },
    });
    expect(created.status).toBe(201);
    const sealed = async () =>
      (await s.deps.sql<{ secret_sealed: string }[]>`SELECT secret_sealed FROM webhook_subscriptions WHERE id = ${created.json.id}`)[0]
        .secret_sealed;
    const before = await sealed();
    const r = await s.request('PATCH', `/v1/webhook-subscriptions/${created.json.id}`, {
      auth: a,
      body: { secret: 'a-new-secret-0123456789abcdef0123' },
    });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ code: 'VALIDATION_ERROR', message: expect.stringContaining('secret') });
    expect(paths(r)).toEqual([['secret']]);
    expect(await sealed()).toBe(before);
  });

  it('creating a subscription with "status" is refused and creates nothing', async () => {
    const count = async () =>
      (await s.deps.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM webhook_subscriptions WHERE app_id = ${a.appId}`)[0].n;
    const before = await count();
    const r = await s.request('POST', '/v1/webhook-subscriptions', {
      auth: a,
      body: { name: 'paused', target_url: 'https://example.com/hook', event_patterns: ['*'], status: 'PAUSED' },
    });
    expect(r.status).toBe(400);
    expect(paths(r)).toEqual([['status']]);
    expect(await count()).toBe(before);
  });

  it('POST /v1/events with camelCase originEventId, or an unknown edge field, is refused and writes nothing', async () => {
    const origin = await s.request('POST', '/v1/events', { auth: a, body: { event_type: 'order.placed', payload: {} } });
    expect(origin.status).toBe(201);
    const count = async () => (await s.deps.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE app_id = ${a.appId}`)[0].n;
    const before = await count();
    const camel = await s.request('POST', '/v1/events', {
      auth: a,
      body: { event_type: 'order.shipped', payload: {}, originEventId: origin.json.id },
    });
    expect(camel.status).toBe(400);
    expect(paths(camel)).toEqual([['originEventId']]);
    const edge = await s.request('POST', '/v1/events', {
      auth: a,
      body: { event_type: 'order.shipped', edges: [{ edge_type: 'by', target_node_type: 'file', target_node_id: 'x', weight: 2 }] },
    });
    expect(edge.status).toBe(400);
    expect(paths(edge)).toEqual([['edges', 0, 'weight']]);
    expect(await count()).toBe(before);
  });

  it('extra multipart fields beside "file" are refused and nothing is stored', async () => {
    const form = new FormData();
    form.set('file', new Blob(['hello']), 'a.txt');
    form.set('purpose', 'x');
    const r = await apiFetch(`${s.base}/v1/files`, { method: 'POST', headers: a.headers, body: form });
    const json = (await r.json()) as { error: { code: string; details: { path: unknown[] }[] } };
    expect(r.status).toBe(400);
    expect(json.error.details.map((d) => d.path)).toEqual([['purpose']]);
    const [{ n }] = await s.deps.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM files WHERE app_id = ${a.appId}`;
    expect(n).toBe(0);
  });
});

/** A raw request, so the test controls exactly which headers go out (fetch adds a Content-Type to string bodies). */
function rawPost(path: string, body: string, contentType?: string): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${s.base}${path}`, {
      method: 'POST',
      headers: { ...a.headers, 'Content-Length': Buffer.byteLength(body), ...(contentType ? { 'Content-Type': contentType } : {}) },
    });
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c) => {
        text += c;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('body media type and shape', () => {
  const event = JSON.stringify({ event_type: 'order.placed', payload: {} });

  it.each([
    ['text/plain', 'text/plain'],
    ['form-urlencoded', 'application/x-www-form-urlencoded'],
    ['no Content-Type', undefined],
  ])('answers a %s body on a JSON endpoint with 415 UNSUPPORTED_MEDIA_TYPE', async (_name, type) => {
    for (const path of ['/v1/events', '/v1/webhook-subscriptions/00000000-0000-4000-8000-000000000000/rotate-secret']) {
      const r = await rawPost(path, event, type);
      expect(r.status, path).toBe(415);
      expect(r.json.error).toEqual({ code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.stringContaining('application/json') });
    }
  });

  it('still takes a body-less POST without a Content-Type', async () => {
    const created = await s.request('POST', '/v1/webhook-subscriptions', {
      auth: a,
      body: { name: 'rotate', target_url: 'https://example.com/hook', event_patterns: ['*'] },
    });
    const r = await s.request('POST', `/v1/webhook-subscriptions/${created.json.id}/rotate-secret`, { auth: a });
    expect(r.status).toBe(200);
  });

  it.each(['null', '"x"', '[]', '[{"event_type":"a"}]', '1', 'true'])(
    'answers the JSON body %s with 400 VALIDATION_ERROR saying it must be an object',
    async (body) => {
      for (const path of ['/v1/events', '/graphql']) {
        const r = await rawPost(path, body, 'application/json');
        expect(r.status, path).toBe(400);
        expect(r.json.error.code, path).toBe('VALIDATION_ERROR');
        expect(r.json.error.message, path).toMatch(/must be a JSON object/);
      }
    },
  );

  it('still answers JSON that does not parse with INVALID_JSON', async () => {
    const r = await rawPost('/v1/events', '{"event_type":', 'application/json');
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe('INVALID_JSON');
  });
});

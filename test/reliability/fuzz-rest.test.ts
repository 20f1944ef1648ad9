import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { expectErrorBody, fromSchema, nastyJson, nastyString, rowCounts, RUNS, type JsonSchema } from './support/fuzz.js';
import { apiFetch } from '../helpers/openapi-contract.js';

/**
 * Property-based sweep of every REST route the service declares (read from its own OpenAPI
 * document, so a route added later is swept without touching this file): arbitrary JSON
 * bodies, bodies with the route's own field names holding arbitrary values, malformed JSON,
 * hostile path and query parameters. Every answer must be a success or a documented error
 * code with its status — never a 500 — and a refused request must write nothing.
 *
 * No worker runs, so the database changes only inside the request being checked.
 */
let s: TestStack;
let a: AppCredentials;
let routes: Route[];
/** Ids of real rows of the application, offered wherever an id goes. */
let ids: string[];

interface Route {
  method: string;
  path: string;
  bodySchema?: JsonSchema;
  bodyFields: string[];
  queryParams: string[];
  documented: Set<number>;
}

beforeAll(async () => {
  s = await startTestStack({ workers: false, env: { RATE_LIMIT_PER_MINUTE: '100000000', EVENT_WAIT_MS: '20', SEND_WAIT_MS: '20' } });
  a = await s.createApp();
  ids = await realIds();
  const doc = (await s.request('GET', '/v1/openapi.json')).json as {
    paths: Record<
      string,
      Record<
        string,
        {
          parameters?: { name: string; in: string }[];
          requestBody?: { content: Record<string, { schema: JsonSchema }> };
          responses: Record<string, unknown>;
        }
      >
    >;
  };
  routes = Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({
      method: method.toUpperCase(),
      path,
      bodySchema: op.requestBody?.content?.['application/json']?.schema,
      bodyFields: Object.keys(op.requestBody?.content?.['application/json']?.schema?.properties ?? {}),
      queryParams: (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
      documented: new Set(Object.keys(op.responses).map(Number)),
    })),
  );
});
afterAll(() => s.close());

/** A connection, an event, a webhook subscription, a user, a conversation and an event schema of the application. */
async function realIds(): Promise<string[]> {
  const post = async (path: string, body: unknown) => (await s.request('POST', path, { auth: a, body })).json?.id as string | undefined;
  const conn = await post('/v1/platform-connections', {
    platform_name: 'TELEGRAM',
    name: 'fuzz',
    config: { bot_token: '123:fuzz', api_base_url: 'http://127.0.0.1:9' },
  });
  const event = await post('/v1/events', { event_type: 'fuzz.seed', payload: {} });
  const sub = await post('/v1/webhook-subscriptions', { name: 'fuzz', target_url: 'http://127.0.0.1:9/hook', event_patterns: ['fuzz.*'] });
  const schema = await post('/v1/event-schemas', {
    name: 'fuzz.typed',
    json_schema: { type: 'object', required: ['n'], properties: { n: { type: 'integer' } } },
    enforce_validation: true,
  });
  const [pu] = await s.deps.sql<{ id: string; user_id: string }[]>`
    INSERT INTO platform_users (app_id, platform_connection_id, platform, external_id, name) VALUES (${a.appId}, ${conn ?? null}, 'TELEGRAM', '42', 'Fuzz') RETURNING id, user_id`;
  return [conn, event, sub, schema, pu?.id, pu?.user_id].filter((x): x is string => typeof x === 'string');
}

const pathValue = fc.oneof(
  nastyString.filter((v) => v.length > 0),
  fc.uuid(),
);
/** Percent-encodes a path segment; a lone surrogate becomes the invalid UTF-8 it would be on the wire. */
const segment = (value: string) => {
  try {
    return encodeURIComponent(value);
  } catch {
    return '%ED%A0%80';
  }
};
const fill = (path: string, value: string) => path.replace(/\{[^}]+\}/g, segment(value));
const queryString = (params: Record<string, string>) => {
  const q = Object.entries(params)
    .map(([k, v]) => `${segment(k)}=${segment(v)}`)
    .join('&');
  return q ? `?${q}` : '';
};

/**
 * One request; an event stream that opens (200 text/event-stream) is a success and is closed
 * at once rather than read to its end.
 */
async function send(method: string, path: string, body: string | undefined, headers: Record<string, string>) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), 10_000);
  try {
    const res = await apiFetch(s.base + path, { method, headers: { ...a.headers, ...headers }, body, signal: ctl.signal });
    if (res.status === 200 && (res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
      ctl.abort();
      return { status: 200, text: '(event stream)', json: undefined };
    }
    const text = await res.text();
    let json: any;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, text, json };
  } finally {
    clearTimeout(timer);
  }
}

/** Sends one fuzzed request and checks the contract; returns nothing, throws on a violation. */
async function check(route: Route, path: string, body: string | undefined, headers: Record<string, string> = {}) {
  const before = await rowCounts(s.deps.sql);
  const r = await send(route.method, path, body, body !== undefined ? { 'Content-Type': 'application/json', ...headers } : headers);
  const context = `${route.method} ${path} ${body?.slice(0, 300) ?? ''} → ${r.status} ${r.text.slice(0, 300)}`;
  expect(r.status, context).toBeLessThan(500);
  if (r.status >= 400) {
    expectErrorBody(r.status, r.json, context);
    // The document declares what the JSON parser and the storable-text check answer before any route too.
    expect([...route.documented], `${context}: status not in the route's documented responses`).toContain(r.status);
    expect(await rowCounts(s.deps.sql), `${context}: a refused request wrote something`).toEqual(before);
  }
}

describe('REST bad-input sweep', () => {
  it('covers the routes of every resource', () => {
    const paths = new Set(routes.map((r) => r.path));
    for (const p of ['/v1/events', '/v1/messages', '/v1/platform-connections', '/v1/webhook-subscriptions']) expect(paths).toContain(p);
  });

  it('answers arbitrary JSON bodies with a documented code, never 500, writing nothing when it refuses', { timeout: 600_000 }, async () => {
    for (const route of routes.filter((r) => r.method !== 'GET')) {
      await fc.assert(
        fc.asyncProperty(pathValue, nastyJson, async (id, body) => check(route, fill(route.path, id), JSON.stringify(body))),
        { numRuns: RUNS },
      );
    }
  });

  it('answers bodies with the route’s own fields holding arbitrary values the same way', { timeout: 600_000 }, async () => {
    for (const route of routes.filter((r) => r.bodyFields.length)) {
      const body = fc.dictionary(fc.constantFrom(...route.bodyFields), nastyJson, { minKeys: 1, maxKeys: route.bodyFields.length });
      await fc.assert(
        fc.asyncProperty(pathValue, body, async (id, b) => check(route, fill(route.path, id), JSON.stringify(b))),
        { numRuns: RUNS * 2 },
      );
    }
  });

  it('answers bodies that mostly fit the route’s schema, with real ids mixed in, the same way', { timeout: 600_000 }, async () => {
    for (const route of routes.filter((r) => r.bodySchema)) {
      await fc.assert(
        fc.asyncProperty(fc.oneof(fc.constantFrom(...ids), pathValue), fromSchema(route.bodySchema, ids), async (id, b) =>
          check(route, fill(route.path, id), JSON.stringify(b)),
        ),
        { numRuns: RUNS * 3 },
      );
    }
  });

  it('answers malformed JSON and odd content types with INVALID_JSON or UNSUPPORTED_MEDIA_TYPE-style 4xx', {
    timeout: 600_000,
  }, async () => {
    const raw = fc.oneof(
      fc.string({ maxLength: 50 }),
      fc.constantFrom('{', '{"a":', '[1,2', 'nul', '{"a":1}}', '\u0000', '{"__proto__":{"x":1}}'),
    );
    for (const route of routes.filter((r) => r.method !== 'GET')) {
      await fc.assert(
        fc.asyncProperty(raw, async (text) => check(route, fill(route.path, '00000000-0000-0000-0000-000000000000'), text)),
        { numRuns: 15 },
      );
      await check(route, fill(route.path, '00000000-0000-0000-0000-000000000000'), '{}', {
        'Content-Type': 'application/json; charset=utf-16',
      });
    }
  });

  it('answers hostile path and query parameters of every read with a documented code', { timeout: 600_000 }, async () => {
    for (const route of routes.filter((r) => r.method === 'GET')) {
      const query = fc.dictionary(
        fc.oneof(fc.constantFrom(...(route.queryParams.length ? route.queryParams : ['x'])), nastyString),
        nastyString,
        { maxKeys: 4 },
      );
      await fc.assert(
        fc.asyncProperty(pathValue, query, async (id, q) => check(route, fill(route.path, id) + queryString(q), undefined)),
        { numRuns: RUNS },
      );
    }
  });

  it('answers repeated query parameters (arrays) with a documented code', async () => {
    for (const route of routes.filter((r) => r.method === 'GET' && r.queryParams.length)) {
      const p = route.queryParams[0];
      await check(route, `${fill(route.path, '00000000-0000-0000-0000-000000000000')}?${p}=1&${p}=2`, undefined);
      await check(route, `${fill(route.path, '00000000-0000-0000-0000-000000000000')}?${p}[a]=1`, undefined);
    }
  });
});

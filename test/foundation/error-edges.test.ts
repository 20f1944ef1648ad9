import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_STATUS, type ErrorCode } from '../../src/errors.js';
import { apiFetch } from '../helpers/openapi-contract.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

// The edges a client meets first: every refusal, on every face, is the one documented body
// `{"error":{"code","message","details"?}}` with the status its code maps to; a known path asked
// with a method it does not take is 405 with `Allow`, not 404.
let s: TestStack;
let a: AppCredentials;

beforeAll(async () => {
  s = await startTestStack({ workers: false, env: { RATE_LIMIT_PER_MINUTE: '100000' } });
  a = await s.createApp();
});
afterAll(() => s.close());

interface Call {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string | FormData;
}

async function call(c: Call) {
  const r = await apiFetch(s.base + c.path, { method: c.method, headers: c.headers, body: c.body });
  const text = await r.text();
  return { status: r.status, headers: r.headers, text };
}

/** The one error body: exactly `error`, holding a known code, a message and optional details. */
function expectErrorBody(r: { status: number; headers: Headers; text: string }, code: ErrorCode, where: string) {
  expect(r.status, `${where}: status (body ${r.text.slice(0, 300)})`).toBe(ERROR_STATUS[code]);
  expect(r.headers.get('content-type') ?? '', `${where}: content type`).toMatch(/^application\/json/);
  let body: { error?: { code?: unknown; message?: unknown; details?: unknown } };
  try {
    body = JSON.parse(r.text);
  } catch {
    throw new Error(`${where}: body is not JSON: ${JSON.stringify(r.text)}`);
  }
  expect(Object.keys(body), `${where}: ${r.text}`).toEqual(['error']);
  expect(body.error?.code, where).toBe(code);
  expect(typeof body.error?.message, where).toBe('string');
  expect(String(body.error?.message ?? '').length, where).toBeGreaterThan(0);
  if (body.error?.details !== undefined) expect(Array.isArray(body.error.details), where).toBe(true);
}

const auth = () => a.headers;
const json = (extra: Record<string, string> = {}) => ({ ...auth(), 'Content-Type': 'application/json', ...extra });
const gql = (query: string) => JSON.stringify({ query });

describe('every error is {"error":{…}} with its status', () => {
  const cases: [string, () => Call, ErrorCode][] = [
    // REST and the body parser
    ['unknown route', () => ({ method: 'GET', path: '/nope' }), 'NOT_FOUND'],
    ['unknown /v1 route', () => ({ method: 'POST', path: '/v1/nothing-here', headers: json(), body: '{}' }), 'NOT_FOUND'],
    ['no API key', () => ({ method: 'GET', path: '/v1/events' }), 'UNAUTHORIZED'],
    ['malformed JSON', () => ({ method: 'POST', path: '/v1/events', headers: json(), body: '{"event_type":' }), 'INVALID_JSON'],
    ['JSON that is not an object', () => ({ method: 'POST', path: '/v1/events', headers: json(), body: '[]' }), 'VALIDATION_ERROR'],
    [
      'body too large',
      () => ({ method: 'POST', path: '/v1/events', headers: json(), body: `"${'x'.repeat(1_100_000)}"` }),
      'PAYLOAD_TOO_LARGE',
    ],
    [
      'unsupported charset',
      () => ({ method: 'POST', path: '/v1/events', headers: json({ 'Content-Type': 'application/json; charset=latin1' }), body: '{}' }),
      'UNSUPPORTED_MEDIA_TYPE',
    ],
    [
      'text body on a JSON route',
      () => ({ method: 'POST', path: '/v1/events', headers: { ...auth(), 'Content-Type': 'text/plain' }, body: 'hi' }),
      'UNSUPPORTED_MEDIA_TYPE',
    ],
    ['malformed percent-encoding', () => ({ method: 'GET', path: '/v1/events/%E0%A4%A', headers: auth() }), 'VALIDATION_ERROR'],
    // files
    ['unknown file', () => ({ method: 'GET', path: '/v1/files/00000000-0000-4000-8000-000000000000', headers: auth() }), 'NOT_FOUND'],
    [
      'unknown file content',
      () => ({ method: 'GET', path: '/v1/files/00000000-0000-4000-8000-000000000000/content', headers: auth() }),
      'NOT_FOUND',
    ],
    ['upload as JSON', () => ({ method: 'POST', path: '/v1/files', headers: json(), body: '{}' }), 'UNSUPPORTED_MEDIA_TYPE'],
    [
      'upload without a file',
      () => {
        const form = new FormData();
        form.set('note', 'x');
        return { method: 'POST', path: '/v1/files', headers: auth(), body: form };
      },
      'VALIDATION_ERROR',
    ],
    // GraphQL over HTTP: the transport's own refusals
    [
      'GraphQL without a key',
      () => ({ method: 'POST', path: '/graphql', headers: { 'Content-Type': 'application/json' }, body: gql('{__typename}') }),
      'UNAUTHORIZED',
    ],
    [
      'GraphQL as text/plain',
      () => ({ method: 'POST', path: '/graphql', headers: { ...auth(), 'Content-Type': 'text/plain' }, body: gql('{__typename}') }),
      'UNSUPPORTED_MEDIA_TYPE',
    ],
    [
      'GraphQL without a content type',
      () => ({ method: 'POST', path: '/graphql', headers: auth(), body: gql('{__typename}') }),
      'UNSUPPORTED_MEDIA_TYPE',
    ],
    ['GraphQL with malformed JSON', () => ({ method: 'POST', path: '/graphql', headers: json(), body: '{"query":' }), 'INVALID_JSON'],
    ['GraphQL without a query', () => ({ method: 'POST', path: '/graphql', headers: json(), body: '{}' }), 'VALIDATION_ERROR'],
    [
      'GraphQL with a query that is not a string',
      () => ({ method: 'POST', path: '/graphql', headers: json(), body: '{"query":5}' }),
      'VALIDATION_ERROR',
    ],
    [
      'GraphQL with variables that are not an object',
      () => ({ method: 'POST', path: '/graphql', headers: json(), body: JSON.stringify({ query: '{__typename}', variables: [1] }) }),
      'VALIDATION_ERROR',
    ],
    [
      'GraphQL with an operationName that is not a string',
      () => ({ method: 'POST', path: '/graphql', headers: json(), body: JSON.stringify({ query: '{__typename}', operationName: 1 }) }),
      'VALIDATION_ERROR',
    ],
    ['GraphQL GET without a query', () => ({ method: 'GET', path: '/graphql', headers: auth() }), 'VALIDATION_ERROR'],
    [
      'GraphQL GET with variables that are not JSON',
      () => ({ method: 'GET', path: '/graphql?query=%7B__typename%7D&variables=%7B', headers: auth() }),
      'VALIDATION_ERROR',
    ],
    [
      'GraphQL mutation over GET',
      () => ({
        method: 'GET',
        path: `/graphql?query=${encodeURIComponent('mutation { createEvent(eventType: "x.y") { id } }')}`,
        headers: auth(),
      }),
      'METHOD_NOT_ALLOWED',
    ],
    [
      'GraphQL with an Accept it cannot answer',
      () => ({ method: 'POST', path: '/graphql', headers: json({ Accept: 'text/html' }), body: gql('{__typename}') }),
      'NOT_ACCEPTABLE',
    ],
    // GraphQL over SSE (distinct connections) refuses the same way
    [
      'graphql-sse as text/plain',
      () => ({ method: 'POST', path: '/', headers: { ...auth(), 'Content-Type': 'text/plain', Accept: 'text/event-stream' }, body: 'x' }),
      'UNSUPPORTED_MEDIA_TYPE',
    ],
    [
      'graphql-sse without a query',
      () => ({ method: 'POST', path: '/', headers: json({ Accept: 'text/event-stream' }), body: '{}' }),
      'VALIDATION_ERROR',
    ],
    [
      'graphql-sse with malformed JSON',
      () => ({ method: 'POST', path: '/', headers: json({ Accept: 'text/event-stream' }), body: '{' }),
      'INVALID_JSON',
    ],
    // the portal's files and Bull Board's door
    ['missing portal asset', () => ({ method: 'GET', path: '/portal/assets/nope.js' }), 'NOT_FOUND'],
    ['Bull Board without the admin token', () => ({ method: 'GET', path: '/admin/queues' }), 'UNAUTHORIZED'],
  ];

  it.each(cases)('%s', async (where, make, code) => {
    expectErrorBody(await call(make()), code, where);
  });
});

describe('a known path with a method it does not take', () => {
  const allowOf = (r: { headers: Headers }) =>
    (r.headers.get('allow') ?? '')
      .split(',')
      .map((m) => m.trim())
      .filter(Boolean)
      .sort();
  const withHeadAndOptions = (methods: string[]) =>
    [...new Set([...methods, ...(methods.includes('GET') ? ['HEAD'] : []), 'OPTIONS'])].sort();

  it('answers 405 METHOD_NOT_ALLOWED with Allow on every path of the OpenAPI document', async () => {
    const doc = JSON.parse((await call({ method: 'GET', path: '/v1/openapi.json' })).text) as { paths: Record<string, object> };
    const tried: string[] = [];
    for (const [template, ops] of Object.entries(doc.paths)) {
      const path = template.replace(/\{[^}]+\}/g, '00000000-0000-4000-8000-000000000000');
      const methods = Object.keys(ops).map((m) => m.toUpperCase());
      for (const wrong of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'].filter((m) => !methods.includes(m))) {
        const r = await call({ method: wrong, path, headers: json(), body: wrong === 'GET' ? undefined : '{}' });
        expectErrorBody(r, 'METHOD_NOT_ALLOWED', `${wrong} ${template}`);
        expect(allowOf(r), `${wrong} ${template}`).toEqual(withHeadAndOptions(methods));
        tried.push(`${wrong} ${template}`);
      }
    }
    expect(tried.length).toBeGreaterThan(50);
  });

  it.each([
    ['PUT', '/graphql', ['GET', 'POST']],
    ['DELETE', '/graphql/schema.graphql', ['GET']],
    ['POST', '/healthz', ['GET']],
    ['POST', '/readyz', ['GET']],
    ['DELETE', '/metrics', ['GET']],
    ['POST', '/v1/openapi.json', ['GET']],
    ['POST', '/portal/settings', ['GET']],
  ])('%s %s → 405 with Allow', async (method, path, methods) => {
    const r = await call({ method, path, headers: auth() });
    expectErrorBody(r, 'METHOD_NOT_ALLOWED', `${method} ${path}`);
    expect(allowOf(r)).toEqual(withHeadAndOptions(methods));
  });

  it('answers OPTIONS on a known path with 204 and Allow, and on an unknown one with the JSON 404', async () => {
    const known = await call({ method: 'OPTIONS', path: '/v1/events' });
    expect(known.status).toBe(204);
    expect(known.text).toBe('');
    expect(allowOf(known)).toEqual(['GET', 'HEAD', 'OPTIONS', 'POST']);
    const graphql = await call({ method: 'OPTIONS', path: '/graphql' });
    expect(graphql.status).toBe(204);
    expect(allowOf(graphql)).toEqual(['GET', 'HEAD', 'OPTIONS', 'POST']);
    expectErrorBody(await call({ method: 'OPTIONS', path: '/nope' }), 'NOT_FOUND', 'OPTIONS /nope');
  });

  it('answers HEAD wherever GET is answered, without a body', async () => {
    const r = await call({ method: 'HEAD', path: '/healthz' });
    expect(r.status).toBe(200);
    expect(r.text).toBe('');
    const refused = await call({ method: 'HEAD', path: '/v1/events' });
    expect(refused.status).toBe(401);
  });
});

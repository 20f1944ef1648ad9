import { getIntrospectionQuery } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { admitOperation } from '../../src/graphql/admission.js';
import { graphqlLimits } from '../../src/graphql/limits.js';
import { createSchema } from '../../src/graphql/schema.js';
import { openSse } from '../helpers/sse.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

/**
 * A tenant's GraphQL document must not be able to stall the process or spend more than its
 * share, whichever of the two GraphQL endpoints it reaches: `POST /graphql` (graphql-http) or
 * `POST /` with `Accept: text/event-stream` (graphql-sse, distinct connections).
 */
let s: TestStack;
let limited: TestStack;
const LIMIT = 20;

beforeAll(async () => {
  [s, limited] = await Promise.all([
    startTestStack({ workers: false }),
    startTestStack({ workers: false, env: { RATE_LIMIT_PER_MINUTE: String(LIMIT) } }),
  ]);
});
afterAll(() => Promise.all([s.close(), limited.close()]));

type Via = 'http' | 'sse';
const VIAS: Via[] = ['http', 'sse'];

interface Answer {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  ms: number;
}

/** One GraphQL request through either endpoint; an SSE answer is its first frame. Bounded by `timeoutMs`. */
async function call(
  stack: TestStack,
  via: Via,
  auth: AppCredentials,
  query: string,
  variables?: Record<string, unknown>,
  timeoutMs = 10_000,
): Promise<Answer> {
  const t0 = performance.now();
  const headers = { ...auth.headers, 'Content-Type': 'application/json' };
  const body = JSON.stringify({ query, variables });
  if (via === 'http') {
    const r = await fetch(`${stack.base}/graphql`, { method: 'POST', headers, body, signal: AbortSignal.timeout(timeoutMs) });
    const text = await r.text();
    return { status: r.status, headers: r.headers, body: JSON.parse(text), ms: performance.now() - t0 };
  }
  const c = await Promise.race([
    openSse(`${stack.base}/`, { method: 'POST', headers, body }),
    new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no answer in ${timeoutMs} ms`)), timeoutMs)),
  ]);
  if (c.text !== undefined) return { status: c.status, headers: c.headers, body: JSON.parse(c.text), ms: performance.now() - t0 };
  const frame = await c.next(timeoutMs);
  c.close();
  return { status: c.status, headers: c.headers, body: JSON.parse(frame?.data ?? 'null'), ms: performance.now() - t0 };
}

const codesOf = (a: Answer): string[] => (a.body?.errors ?? []).map((e: { extensions?: { code?: string } }) => e.extensions?.code);
const schemaCount = async (stack: TestStack, appId: string) =>
  (await stack.deps.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM event_schemas WHERE app_id = ${appId}`)[0].n;

/** Each level spreads the next fragment under two fields: expanded, the document doubles per level. */
function fragmentPairs(levels: number): string {
  const frags = Array.from(
    { length: levels },
    (_, i) => `fragment F${i} on Event { originEvent { ...F${i + 1} } o: originEvent { ...F${i + 1} } }`,
  );
  return `query { event(id: "00000000-0000-0000-0000-000000000000") { ...F0 } } ${frags.join(' ')} fragment F${levels} on Event { id }`;
}

/** Each level spreads the next fragment twice in the same selection: no depth, but doubling on expansion. */
function flatPairs(levels: number): string {
  const frags = Array.from({ length: levels }, (_, i) => `fragment F${i} on Event { id a${i}: eventType ...F${i + 1} ...F${i + 1} }`);
  return `query { event(id: "00000000-0000-0000-0000-000000000000") { ...F0 } } ${frags.join(' ')} fragment F${levels} on Event { id }`;
}

/** `n` aliases of the largest page of events, each with a payload. */
const aliasBomb = (n: number) =>
  `{ ${Array.from({ length: n }, (_, i) => `a${i}: events(first: 500) { edges { node { id payload } } }`).join(' ')} }`;

const schemaMutation = (n: number, tag: string) =>
  `mutation { ${Array.from({ length: n }, (_, i) => `m${i}: createEventSchema(name: "${tag}.${i}", jsonSchema: { type: "object" }) { id }`).join(' ')} }`;

function expectRefused(a: Answer, code: string) {
  expect(a.status, JSON.stringify(a.body).slice(0, 300)).toBe(400);
  expect(codesOf(a)).toContain(code);
  // Refused before execution: no `data` at all.
  expect(a.body.data).toBeUndefined();
}

describe('GraphQL admission (both endpoints call it)', () => {
  const schema = createSchema();
  const limits = graphqlLimits(parseConfig({}));
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];

  it.each([
    ['nested fragment pairs', fragmentPairs(60)],
    ['flat fragment pairs', flatPairs(100)],
    ['1,000 aliases', aliasBomb(1000)],
  ])('refuses %s in well under 100 ms of CPU (median of 5)', (_name, query) => {
    // CPU time of this process, not wall time: what a bomb costs the service, and unlike the
    // clock it does not grow when other processes share the cores.
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t0 = process.cpuUsage();
      const a = admitOperation(schema, limits, { query });
      const used = process.cpuUsage(t0);
      times.push((used.user + used.system) / 1000);
      expect(a.ok).toBe(false);
      if (!a.ok) expect(a.errors.map((e) => e.extensions.code)).toContain('QUERY_TOO_COMPLEX');
    }
    expect(median(times)).toBeLessThan(100);
  });

  it('admits the standard introspection query that GraphQL tools send', () => {
    const a = admitOperation(schema, limits, {
      query: getIntrospectionQuery({
        descriptions: true,
        specifiedByUrl: true,
        directiveIsRepeatable: true,
        schemaDescription: true,
        inputValueDeprecation: true,
      }),
    });
    expect(a.ok ? [] : a.errors.map((e) => e.message)).toEqual([]);
  });

  it('admits a full page of 500 events with every field', () => {
    const query = `{ events(first: 500) { edges { cursor node {
      id appId eventType payload attachments createdAt originEventId conversationId platformConnectionId cursor
      edges { edgeType targetNodeType targetNodeId targetPlatformUser { id externalId name } }
      originEvent { id eventType }
    } } pageInfo { hasNextPage endCursor } } }`;
    const a = admitOperation(schema, limits, { query });
    expect(a.ok ? [] : a.errors.map((e) => e.message)).toEqual([]);
  });

  it('charges a mutation one point per top-level field it runs, fragments included, a query one, a subscription none', () => {
    const points = (query: string) => {
      const a = admitOperation(schema, limits, { query });
      if (!a.ok) throw new Error(a.errors[0].message);
      return a.points;
    };
    expect(points('{ application { id } a: application { id } }')).toBe(1);
    expect(points('subscription { eventStream { id } }')).toBe(0);
    expect(points(schemaMutation(3, 'x'))).toBe(3);
    expect(points('mutation { __typename }')).toBe(1);
    expect(
      points(
        'mutation { ...M ...M ... on Mutation { c: createEventSchema(name: "c", jsonSchema: {}) { id } } } fragment M on Mutation { a: createEventSchema(name: "a", jsonSchema: {}) { id } b: createEventSchema(name: "b", jsonSchema: {}) { id } }',
      ),
    ).toBe(3);
  });
});

describe('GET /graphql', () => {
  it('admits a query the same way, refuses a mutation with 405 and a document past a limit with 400', async () => {
    const app = await s.createApp();
    const get = (query: string) => fetch(`${s.base}/graphql?query=${encodeURIComponent(query)}`, { headers: app.headers });
    const ok = await get('{ application { id } }');
    expect(ok.status).toBe(200);
    expect((await ok.json()).data.application.id).toBe(app.appId);
    expect((await get(schemaMutation(1, 'get'))).status).toBe(405);
    expect(await schemaCount(s, app.appId)).toBe(0);
    const deep = await get(`{ event(id: "00000000-0000-0000-0000-000000000000") { ${'originEvent { '.repeat(12)}id${' }'.repeat(12)} } }`);
    expect(deep.status).toBe(400);
    expect((await deep.json()).errors[0].extensions.code).toBe('QUERY_TOO_COMPLEX');
  });
});

describe.each(VIAS)('GraphQL document limits via %s', (via) => {
  it('refuses nested fragment pairs quickly with QUERY_TOO_COMPLEX', async () => {
    const app = await s.createApp();
    const query = fragmentPairs(18);
    // The size of the example (952 bytes took 2.8 s before).
    expect(query.length).toBeLessThan(2000);
    const a = await call(s, via, app, query, undefined, 5_000);
    expectRefused(a, 'QUERY_TOO_COMPLEX');
    // Generous for a loaded machine; the home-made walk took seconds at this size, doubling per level.
    expect(a.ms).toBeLessThan(2_000);
  });

  it('refuses 1,000 aliases of events(first: 500) with 400 before running it', async () => {
    const app = await s.createApp();
    const a = await call(s, via, app, aliasBomb(1000), undefined, 5_000);
    expectRefused(a, 'QUERY_TOO_COMPLEX');
  });

  it('refuses more aliases than the limit, even of cheap fields', async () => {
    const app = await s.createApp();
    const query = `{ ${Array.from({ length: 31 }, (_, i) => `a${i}: application { id }`).join(' ')} }`;
    const a = await call(s, via, app, query);
    expectRefused(a, 'QUERY_TOO_COMPLEX');
    expect(a.body.errors[0].message).toMatch(/alias/i);
  });

  it('refuses a few aliases of large pages by their estimated cost', async () => {
    const app = await s.createApp();
    const a = await call(s, via, app, aliasBomb(10));
    expectRefused(a, 'QUERY_TOO_COMPLEX');
    expect(a.body.errors[0].message).toMatch(/cost/i);
  });

  it('refuses a document whose estimated cost is past the limit, with `first` given by a variable', async () => {
    const app = await s.createApp();
    const query = `query ($n: Int) { users(first: $n) { edges { node { events(first: $n) { edges { node { id payload } } } } } } }`;
    expectRefused(await call(s, via, app, query, { n: 200 }), 'QUERY_TOO_COMPLEX');
    // The same shape with small pages is fine.
    const small = await call(s, via, app, query, { n: 2 });
    expect(small.status).toBe(200);
    expect(small.body.errors).toBeUndefined();
  });

  it('refuses a document nested past the depth limit', async () => {
    const app = await s.createApp();
    const deep = `{ event(id: "00000000-0000-0000-0000-000000000000") { ${'originEvent { '.repeat(12)}id${' }'.repeat(12)} } }`;
    expectRefused(await call(s, via, app, deep), 'QUERY_TOO_COMPLEX');
  });

  it('refuses a document past the token limit', async () => {
    const app = await s.createApp();
    expectRefused(await call(s, via, app, `{ ${'__typename '.repeat(5000)}}`), 'QUERY_TOO_COMPLEX');
  });

  it('refuses a document past the directive limit', async () => {
    const app = await s.createApp();
    expectRefused(await call(s, via, app, `{ ${'__typename @include(if: true) '.repeat(60)}}`), 'QUERY_TOO_COMPLEX');
  });

  it('refuses a NUL in a string literal with VALIDATION_ERROR, writing nothing', async () => {
    const app = await s.createApp();
    const a = await call(s, via, app, 'mutation { createEventSchema(name: "nul", description: "bad\\u0000text", jsonSchema: {}) { id } }');
    expectRefused(a, 'VALIDATION_ERROR');
    expect(await schemaCount(s, app.appId)).toBe(0);
  });

  it('counts each top-level mutation field against the rate limit, in one decision', async () => {
    const app = await limited.createApp();
    // More mutations than the whole budget: refused as a whole, nothing runs.
    const over = await call(limited, via, app, schemaMutation(LIMIT + 5, 'over'));
    expect(over.status).toBe(429);
    expect(over.body.error.code).toBe('RATE_LIMITED');
    expect(await schemaCount(limited, app.appId)).toBe(0);
    const createEvents = await call(
      limited,
      via,
      await limited.createApp(),
      `mutation { ${Array.from({ length: LIMIT + 1 }, (_, i) => `e${i}: createEvent(eventType: "x.y") { id }`).join(' ')} }`,
    );
    expect(createEvents.status).toBe(429);

    const fresh = await limited.createApp();
    const half = await call(limited, via, fresh, schemaMutation(LIMIT / 2, 'half'));
    expect(half.status).toBe(200);
    expect(half.body.errors).toBeUndefined();
    expect(Number(half.headers.get('ratelimit-remaining'))).toBe(LIMIT / 2);
    expect(await schemaCount(limited, fresh.appId)).toBe(LIMIT / 2);
    // A query counts one.
    const q = await call(limited, via, fresh, '{ application { id } }');
    expect(q.status).toBe(200);
    expect(Number(q.headers.get('ratelimit-remaining'))).toBe(LIMIT / 2 - 1);
    // The rest of the budget cannot hold another half.
    const refused = await call(limited, via, fresh, schemaMutation(LIMIT / 2, 'again'));
    expect(refused.status).toBe(429);
    expect(await schemaCount(limited, fresh.appId)).toBe(LIMIT / 2);
  });
});

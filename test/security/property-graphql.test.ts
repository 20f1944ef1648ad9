import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_STATUS } from '../../src/errors.js';
import { openSse } from '../helpers/sse.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

/**
 * Property sweep: GraphQL documents of growing depth, width, aliases, fragments (cycles
 * included) and directives, sent to both GraphQL endpoints. Whatever the document, the answer
 * comes within a time bound and is never a 500: either it runs, or it is refused with a code.
 */
let s: TestStack;
let app: AppCredentials;
// Each answer, however large the document, well within this on a loaded 2-core machine.
const BOUND_MS = 3_000;
const RUNS = 100;

beforeAll(async () => {
  // The sweep is about cost, not the request budget.
  s = await startTestStack({ workers: false, env: { RATE_LIMIT_PER_MINUTE: '1000000' } });
  app = await s.createApp();
});
afterAll(() => s.close());

const ZERO_ID = '"00000000-0000-0000-0000-000000000000"';
const alias = fc.option(fc.constantFrom('a', 'b', 'c', 'x1', 'y2', 'id'), { nil: undefined, freq: 2 });
const directive = fc.constantFrom('', '', '', ' @include(if: true)', ' @skip(if: false)', ' @skip(if: true)');
const field = fc.constantFrom('id', 'eventType', 'payload', 'createdAt', 'appId', '__typename');
const named = (a: string | undefined, rest: string) => `${a ? `${a}: ` : ''}${rest}`;

/** A selection on Event, `depth` levels of `originEvent` at most, spreading fragments F`from`…F(`to`−1). */
function selection(depth: number, from: number, to: number): fc.Arbitrary<string> {
  const leaf = fc.tuple(alias, field, directive).map(([a, f, d]) => named(a, f + d));
  const options: fc.Arbitrary<string>[] = [leaf];
  if (from < to) options.push(fc.integer({ min: from, max: to - 1 }).map((i) => `...F${i}`));
  if (depth > 0)
    options.push(fc.tuple(alias, selection(depth - 1, from, to), directive).map(([a, sel, d]) => named(a, `originEvent${d} { ${sel} }`)));
  return fc.array(fc.oneof(...options), { minLength: 1, maxLength: 5 }).map((xs) => xs.join(' '));
}

/** Mostly small (documents that run), sometimes up to `max` (documents that must be refused). */
const small = (usual: number, max: number, min = 0) =>
  fc.oneof({ arbitrary: fc.integer({ min, max: usual }), weight: 3 }, { arbitrary: fc.integer({ min, max }), weight: 1 });

const document = fc
  .record({
    depth: small(3, 14),
    fragments: small(4, 30),
    copies: small(3, 60, 1),
    first: fc.integer({ min: 1, max: 500 }),
    kind: fc.constantFrom('event', 'events', 'mutation'),
  })
  .chain(({ depth, fragments, copies, first, kind }) =>
    fc
      .tuple(
        selection(depth, 0, fragments),
        // Fragment i spreads later ones (the pairs that double on expansion); one time in eight any one, cycles included.
        fc.tuple(
          ...Array.from({ length: fragments }, (_, i) =>
            fc.oneof(
              { arbitrary: selection(depth, i + 1, fragments), weight: 7 },
              { arbitrary: selection(depth, 0, fragments), weight: 1 },
            ),
          ),
        ),
      )
      .map(([root, frags]) => {
        const defs = frags.map((sel, i) => `fragment F${i} on Event { ${sel} }`).join(' ');
        const one = (i: number) =>
          kind === 'event'
            ? `r${i}: event(id: ${ZERO_ID}) { ${root} }`
            : kind === 'events'
              ? `r${i}: events(first: ${first}) { edges { node { ${root} } } }`
              : // An invalid name: each field is refused by the domain, so the sweep writes nothing.
                `r${i}: createEvent(eventType: "Not Valid") { ${root} }`;
        const body = Array.from({ length: copies }, (_, i) => one(i)).join(' ');
        return `${kind === 'mutation' ? 'mutation' : 'query'} { ${body} } ${defs}`;
      }),
  );

async function send(
  via: 'http' | 'sse',
  query: string,
): Promise<{ status: number; body: { errors?: { extensions?: { code?: string } }[]; error?: { code: string } } | null }> {
  const headers = { ...app.headers, 'Content-Type': 'application/json' };
  const body = JSON.stringify({ query });
  if (via === 'http') {
    const r = await fetch(`${s.base}/graphql`, { method: 'POST', headers, body, signal: AbortSignal.timeout(BOUND_MS * 2) });
    return { status: r.status, body: JSON.parse(await r.text()) };
  }
  const c = await openSse(`${s.base}/`, { method: 'POST', headers, body });
  if (c.text !== undefined) return { status: c.status, body: JSON.parse(c.text) };
  const frame = await c.next(BOUND_MS * 2);
  c.close();
  return { status: c.status, body: JSON.parse(frame?.data ?? 'null') };
}

describe('GraphQL document sweep', () => {
  it.each(['http', 'sse'] as const)(
    'answers every generated document via %s in bounded time, never with a 500',
    { timeout: 300_000 },
    async (via) => {
      await fc.assert(
        fc.asyncProperty(document, async (query) => {
          const t0 = performance.now();
          const r = await send(via, query);
          const ms = performance.now() - t0;
          const context = `${query.length} chars → ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`;
          expect(r.status, context).toBeLessThan(500);
          expect(ms, context).toBeLessThan(BOUND_MS);
          const codes = r.body?.error ? [r.body.error.code] : (r.body?.errors ?? []).map((e) => e.extensions?.code);
          for (const code of codes) {
            expect(code, context).toBeTypeOf('string');
            expect(code, context).not.toBe('INTERNAL');
            expect(code! in ERROR_STATUS || code === 'GRAPHQL_VALIDATION_FAILED', context).toBe(true);
          }
        }),
        { numRuns: RUNS },
      );
    },
  );
});

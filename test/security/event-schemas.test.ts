import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

/**
 * Event schemas are tenant input compiled and run on shared processes: their regexes must run
 * in linear time, and nothing one application writes into a schema may be seen by, or get in
 * the way of, another's.
 */
let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;
beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger'] });
  [a, b] = await Promise.all([s.createApp(), s.createApp()]);
});
afterAll(() => s?.close());

const schema = (auth: AppCredentials, name: string, json_schema: Record<string, unknown>, enforce_validation = true) =>
  s.request('POST', '/v1/event-schemas', { auth, body: { name, json_schema, enforce_validation } });
const post = (auth: AppCredentials, event_type: string, payload: Record<string, unknown>) =>
  s.request('POST', '/v1/events', { auth, body: { event_type, payload } });

describe('schema regexes', () => {
  it('checks a catastrophic `pattern` and `patternProperties` in bounded time', async () => {
    expect((await schema(a, 'redos.pattern', { type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } })).status).toBe(
      201,
    );
    expect((await schema(a, 'redos.props', { type: 'object', patternProperties: { '^(a|aa)+$': { type: 'number' } } })).status).toBe(201);
    for (const [type, payload] of [
      ['redos.pattern', { s: `${'a'.repeat(40)}!` }],
      ['redos.props', { [`${'a'.repeat(40)}!`]: 'not checked', [`${'a'.repeat(40)}`]: 'refused' }],
    ] as const) {
      const t = Date.now();
      const r = await post(a, type, payload);
      // The backtracking engine took 101 s on the first; linear matching is microseconds.
      expect(Date.now() - t, type).toBeLessThan(3_000);
      expect(r.status, r.text).toBe(400);
      expect(r.json.error.code).toBe('VALIDATION_ERROR');
    }
    expect((await post(a, 'redos.pattern', { s: 'aaaa' })).status).toBe(201);
  });

  it('refuses a schema whose pattern needs backtracking (backreference, lookaround) when it is written', async () => {
    for (const pattern of ['^(a)\\1$', 'a(?=b)', '(?<!x)y']) {
      const r = await schema(a, 'redos.backref', { type: 'string', pattern });
      expect(r.status, `${pattern}: ${r.text}`).toBe(400);
      expect(r.json.error.code).toBe('VALIDATION_ERROR');
    }
  });

  it('finishes in bounded time for generated patterns and inputs (property sweep)', async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom('a', 'a+', '(a+)+', '(a|aa)*', '.*', '[ab]+', '(?:a*)*', 'b?'), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 1, max: 60 }),
        async (parts, len) => {
          const name = `sweep.p${n++}`;
          const created = await schema(b, name, { type: 'object', properties: { s: { type: 'string', pattern: `^${parts.join('')}$` } } });
          expect([201, 400]).toContain(created.status);
          if (created.status !== 201) return;
          const t = Date.now();
          const r = await post(b, name, { s: `${'a'.repeat(len)}!` });
          expect([201, 400]).toContain(r.status);
          expect(Date.now() - t).toBeLessThan(3_000);
        },
      ),
      { numRuns: 25 },
    );
  });
});

describe('schemas of different applications', () => {
  it("cannot reach another application's schema by $ref, nor read its fields", async () => {
    const secret = {
      $id: 'https://tenant-a.example/secret.json',
      type: 'object',
      required: ['a_secret_field'],
      properties: { tier: { enum: ['a-gold', 'a-platinum'] } },
    };
    expect((await schema(a, 'iso.secret', secret)).status).toBe(201);
    expect((await post(a, 'iso.secret', { a_secret_field: 1, tier: 'a-gold' })).status).toBe(201);
    const probe = await schema(b, 'iso.probe', { $ref: 'https://tenant-a.example/secret.json' });
    expect(probe.status, probe.text).toBe(400);
    expect(probe.text).not.toMatch(/a_secret_field|a-gold/);
  });

  it('may use the same $id, and each enforces its own, whatever was loaded first', async () => {
    const id = 'urn:example:order';
    expect((await schema(a, 'iso.order', { $id: id, type: 'object', required: ['from_a'] })).status).toBe(201);
    expect((await post(a, 'iso.order', {})).status).toBe(400);
    const mine = await schema(b, 'iso.order', { $id: id, type: 'object', required: ['from_b'] });
    expect(mine.status, mine.text).toBe(201);
    const r = await post(b, 'iso.order', { from_a: true });
    expect(r.status, r.text).toBe(400);
    expect(r.json.error.details[0].path).toEqual(['payload', 'from_b']);
    expect((await post(b, 'iso.order', { from_b: true })).status).toBe(201);
    expect((await post(a, 'iso.order', { from_b: true })).status).toBe(400);
  });
});

import fc from 'fast-check';
import {
  getNamedType,
  isEnumType,
  isInputObjectType,
  isLeafType,
  isListType,
  isNonNullType,
  isScalarType,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
} from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_STATUS } from '../../src/errors.js';
import { createSchema } from '../../src/graphql/schema.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { expectErrorBody, nastyJson, nastyString, rowCounts, RUNS } from './support/fuzz.js';

/**
 * Property-based sweep of every query and mutation of the GraphQL schema (read from the
 * schema itself, so a field added later is swept too): variables that mostly fit each
 * argument's type, and sometimes do not. Every answer must be free of 500s and INTERNAL
 * errors, every error must carry a documented code, and a mutation that failed must have
 * written nothing.
 */
let s: TestStack;
let a: AppCredentials;
let ids: string[];

beforeAll(async () => {
  s = await startTestStack({ workers: false, env: { RATE_LIMIT_PER_MINUTE: '100000000', EVENT_WAIT_MS: '20', SEND_WAIT_MS: '20' } });
  a = await s.createApp();
  const conn = await s.request('POST', '/v1/platform-connections', {
    auth: a,
    body: { platform_name: 'TELEGRAM', name: 'fuzz', config: { bot_token: '123:fuzz', api_base_url: 'http://127.0.0.1:9' } },
  });
  const sub = await s.request('POST', '/v1/webhook-subscriptions', {
    auth: a,
    body: { name: 'fuzz', target_url: 'http://127.0.0.1:9/hook', event_patterns: ['fuzz.*'] },
  });
  ids = [conn.json?.id, sub.json?.id].filter((x): x is string => typeof x === 'string');
});
afterAll(() => s.close());

/** GraphQL codes besides the REST table: a document or variables that do not fit the schema. */
const GRAPHQL_CODES = new Set(['GRAPHQL_VALIDATION_FAILED', 'GRAPHQL_PARSE_FAILED', 'BAD_USER_INPUT']);

function valueFor(type: GraphQLInputType, depth = 0): fc.Arbitrary<unknown> {
  if (isNonNullType(type)) return valueFor(type.ofType, depth);
  if (isListType(type)) return depth > 3 ? fc.constant([]) : fc.array(valueFor(type.ofType, depth + 1), { maxLength: 3 });
  if (isEnumType(type)) return fc.constantFrom(...type.getValues().map((v) => v.name));
  if (isInputObjectType(type)) {
    if (depth > 3) return fc.constant({});
    const fields = Object.values(type.getFields());
    return fc.record(Object.fromEntries(fields.map((f) => [f.name, valueFor(f.type, depth + 1)])), {
      requiredKeys: fields.filter((f) => isNonNullType(f.type)).map((f) => f.name),
    });
  }
  if (isScalarType(type)) {
    switch (type.name) {
      case 'Int':
        return fc.oneof(fc.integer({ min: -5, max: 500 }), fc.constantFrom(0, -1, 2 ** 31 - 1));
      case 'Float':
        return fc.double({ noNaN: true, noDefaultInfinity: true });
      case 'Boolean':
        return fc.boolean();
      case 'ID':
      case 'String':
        return fc.oneof(nastyString, fc.uuid(), fc.constantFrom(...ids), fc.stringMatching(/^[a-z][a-z0-9_.]{0,20}$/));
      case 'DateTime':
        return fc.oneof(
          fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
          nastyString,
        );
      default:
        return nastyJson;
    }
  }
  return nastyJson;
}

/** Mostly fitting the type; one time in six anything at all (a type error the server must answer cleanly). */
const variable = (arg: GraphQLArgument) => fc.oneof({ arbitrary: valueFor(arg.type), weight: 5 }, { arbitrary: nastyJson, weight: 1 });

function operation(kind: 'query' | 'mutation', field: GraphQLField<unknown, unknown>): string {
  const vars = field.args.map((arg) => `$${arg.name}: ${arg.type.toString()}`).join(', ');
  const args = field.args.map((arg) => `${arg.name}: $${arg.name}`).join(', ');
  const selection = isLeafType(getNamedType(field.type)) ? '' : ' { __typename }';
  return `${kind}${vars ? `(${vars})` : ''} { ${field.name}${args ? `(${args})` : ''}${selection} }`;
}

async function check(kind: 'query' | 'mutation', field: GraphQLField<unknown, unknown>, variables: Record<string, unknown>) {
  const before = kind === 'mutation' ? await rowCounts(s.deps.sql) : undefined;
  const query = operation(kind, field);
  const r = await s.gql(a, query, variables);
  const context = `${query} ${JSON.stringify(variables).slice(0, 300)} → ${r.status} ${r.text.slice(0, 400)}`;
  expect(r.status, context).toBeLessThan(500);
  if (r.json?.error) {
    // Refused before GraphQL ran (body checks): the REST error shape.
    expectErrorBody(r.status, r.json, context);
  } else {
    for (const e of r.json?.errors ?? []) {
      const code = e.extensions?.code;
      expect(code, `${context}: an error without a code`).toBeTypeOf('string');
      expect(code, context).not.toBe('INTERNAL');
      expect(code in ERROR_STATUS || GRAPHQL_CODES.has(code), `${context}: undocumented code ${code}`).toBe(true);
    }
  }
  const failed = r.json?.error || (r.json?.errors?.length && (r.json?.data?.[field.name] ?? null) === null);
  if (before && failed) expect(await rowCounts(s.deps.sql), `${context}: a failed mutation wrote something`).toEqual(before);
}

describe('GraphQL bad-input sweep', () => {
  const schema = createSchema();
  const roots = [
    ['query', schema.getQueryType()],
    ['mutation', schema.getMutationType()],
  ] as const;
  const fields = roots.flatMap(([kind, type]) =>
    Object.values(type?.getFields() ?? {})
      .filter((f) => !f.name.startsWith('_'))
      .map((f) => ({ kind, field: f })),
  );

  it('covers the queries and mutations of every module', () => {
    const names = fields.map((f) => f.field.name);
    for (const n of ['events', 'createEvent', 'sendMessage', 'createWebhookSubscription', 'createPlatformConnection'])
      expect(names).toContain(n);
  });

  it('answers every operation with arbitrary variables cleanly: no 500, no INTERNAL, documented codes, no partial writes', {
    timeout: 600_000,
  }, async () => {
    for (const { kind, field } of fields) {
      const vars = fc.record(Object.fromEntries(field.args.map((arg) => [arg.name, variable(arg)])), {
        requiredKeys: field.args.filter((arg) => isNonNullType(arg.type) && Math.random() < 0.9).map((arg) => arg.name),
      });
      await fc.assert(
        fc.asyncProperty(vars, async (v) => check(kind, field, v)),
        { numRuns: RUNS },
      );
    }
  });

  it('answers malformed documents and request shapes with a clean 4xx', async () => {
    const bodies: unknown[] = [
      { query: '{' },
      { query: 'query { events(first: 1) { edges { node { id } } }' },
      { query: 12 },
      { query: '{ application { id } }', variables: 'x' },
      { query: '{ application { id } }', variables: [1] },
      { query: '{ application { id } }', operationName: 7 },
      { query: 'subscription { eventStream { id } }' },
      {},
      [],
      null,
    ];
    for (const body of bodies) {
      const r = await s.request('POST', '/graphql', { auth: a, body: JSON.stringify(body) });
      const context = `${JSON.stringify(body)} → ${r.status} ${r.text}`;
      expect(r.status, context).toBeLessThan(500);
      // GraphQL over HTTP answers some request errors 200 with `errors` (application/json); each still carries a code.
      if (r.status === 200) {
        expect(r.json.errors?.length, context).toBeGreaterThan(0);
        for (const e of r.json.errors)
          expect(GRAPHQL_CODES.has(e.extensions?.code) || e.extensions?.code in ERROR_STATUS, context).toBe(true);
      }
    }
  });
});

/**
 * Shared pieces of the bad-input sweep: the checks every answer must pass, a snapshot of
 * every table's row count (a refused request must leave them all unchanged), and value
 * generators that mix well-typed, wrongly typed and hostile input.
 */
import fc from 'fast-check';
import { expect } from 'vitest';
import type { Sql } from '../../../src/db.js';
import { ERROR_STATUS } from '../../../src/errors.js';

/** fast-check runs per target; FUZZ_RUNS raises it for a deeper local sweep. */
export const RUNS = Number(process.env.FUZZ_RUNS ?? 40);

/**
 * The suite runs a fixed seed, so a CI run is repeatable and a failure reproduces from its log;
 * `FUZZ_SEED=random` explores new inputs (fast-check prints the seed of any failure it finds,
 * and that seed goes here, or into a regression test, once the bug is fixed).
 */
const seedEnv = process.env.FUZZ_SEED ?? '20261123';
if (seedEnv !== 'random') fc.configureGlobal({ seed: Number(seedEnv) });

/** Row counts of every table in the test database (the migration bookkeeping aside). */
export async function rowCounts(sql: Sql): Promise<Record<string, number>> {
  const tables = await sql<{ name: string }[]>`
    SELECT table_name AS name FROM information_schema.tables
     WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name <> 'pgmigrations' ORDER BY 1`;
  const query = tables.map((t) => `SELECT '${t.name}' AS name, count(*)::int AS n FROM "${t.name}"`).join(' UNION ALL ');
  const rows = await sql.unsafe<{ name: string; n: number }[]>(query);
  return Object.fromEntries(rows.map((r) => [r.name, r.n]));
}

/** The REST error contract: `{error: {code, message}}`, a known code, the status that code maps to. */
export function expectErrorBody(status: number, body: any, context: string): void {
  expect(body, context).toMatchObject({ error: { code: expect.any(String), message: expect.any(String) } });
  const code = body.error.code as keyof typeof ERROR_STATUS;
  expect(Object.keys(ERROR_STATUS), `${context}: unknown error code ${code}`).toContain(code);
  expect(ERROR_STATUS[code], `${context}: ${code} answered with ${status}`).toBe(status);
}

/** Strings a parser trips over: control characters, huge numbers, unicode, SQL/JSON fragments, prototype keys. */
export const nastyString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    '\u0000abc',
    '%00',
    "'; DROP TABLE events; --",
    '__proto__',
    'constructor',
    '../../etc/passwd',
    '9'.repeat(400),
    '-1',
    '1e309',
    'NaN',
    'null',
    '{}',
    '[]',
    '😀'.repeat(50),
    '\ud800',
    'a'.repeat(5000),
    '00000000-0000-0000-0000-000000000000',
    'ffffffff-ffff-ffff-ffff-ffffffffffff',
    'message.inbound',
    '*',
    'a.*',
  ),
);

/** Any JSON value, with hostile strings and keys mixed in. */
export const nastyJson: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.constantFrom(Number.MAX_SAFE_INTEGER * 10, -0, 1e300),
    nastyString,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(nastyString, tie('value'), { maxKeys: 4 }),
  ),
})).value;

/** The subset of JSON Schema (draft 2020-12, as zod emits it) the generator understands. */
export interface JsonSchema {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  format?: string;
  items?: JsonSchema;
  maxItems?: number;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
}

/**
 * Values that mostly fit `schema` — so requests get past the first validation and into the
 * handler — with a hostile value swapped in now and then, and known ids (`ids`) offered for
 * id-like strings so lookups sometimes find a real row.
 */
export function fromSchema(schema: JsonSchema | undefined, ids: string[], depth = 0): fc.Arbitrary<unknown> {
  const wrong = nastyJson;
  const fitting = fitSchema(schema ?? {}, ids, depth);
  return fc.oneof({ arbitrary: fitting, weight: 5 }, { arbitrary: wrong, weight: 1 });
}

function fitSchema(s: JsonSchema, ids: string[], depth: number): fc.Arbitrary<unknown> {
  if (s.enum) return fc.constantFrom(...s.enum);
  if (s.const !== undefined) return fc.constant(s.const);
  const alts = s.anyOf ?? s.oneOf;
  if (alts?.length) return fc.oneof(...alts.map((a) => fitSchema(a, ids, depth)));
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case 'string': {
      const shaped = s.pattern
        ? fc.stringMatching(new RegExp(s.pattern))
        : s.format === 'uri' || s.format === 'url'
          ? fc.webUrl()
          : nastyString;
      const idLike = ids.length ? fc.constantFrom(...ids) : fc.uuid();
      return fc
        .oneof(shaped, idLike, fc.uuid(), nastyString)
        .map((v) => (s.maxLength !== undefined && v.length > s.maxLength + 5 ? v.slice(0, s.maxLength + 1) : v));
    }
    case 'integer':
      return fc.oneof(fc.integer({ min: s.minimum ?? -1000, max: s.maximum ?? 100_000 }), fc.constantFrom(-1, 0, 2 ** 31, 2 ** 53, 1.5));
    case 'number':
      return fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constantFrom(0, -1, 1e308));
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return depth > 3 ? fc.constant([]) : fc.array(fromSchema(s.items, ids, depth + 1), { maxLength: Math.min(s.maxItems ?? 4, 4) });
    case 'object': {
      if (depth > 3) return fc.constant({});
      const props = Object.entries(s.properties ?? {});
      if (props.length === 0) return fc.dictionary(nastyString, nastyJson, { maxKeys: 3 });
      const required = new Set(s.required ?? []);
      return fc.record(Object.fromEntries(props.map(([k, v]) => [k, fromSchema(v, ids, depth + 1)])), {
        requiredKeys: props.map(([k]) => k).filter((k) => required.has(k) && Math.random() < 0.95),
      });
    }
    default:
      return nastyJson;
  }
}

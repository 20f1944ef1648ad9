import { GraphQLError, Kind, valueFromASTUntyped, type ASTVisitor, type ValidationContext, type ValueNode } from 'graphql';
import { AppError } from './errors.js';

/**
 * PostgreSQL cannot store U+0000 nor an unpaired UTF-16 surrogate (`"\ud800"` in JSON) in
 * `text` or `jsonb` (SQLSTATE 22P05 / 22021). A string carrying one would fail its insert — a
 * 500 in a request, and in a worker a job that fails on every attempt. So client input that
 * holds one is refused at the door, and text the service must accept anyway (a platform's
 * delivery, already acknowledged) has it replaced by U+FFFD before it is stored.
 *
 * A JSON number past the double range (`1e400`) parses as Infinity, which JSON and jsonb have
 * no value for: stored, it would silently become null. So client input holding one is refused
 * like unstorable text, and input the service keeps anyway records it as null.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is one of the things PostgreSQL cannot store.
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'g');
const storable = (s: string) => !UNSTORABLE.test(s);
const repaired = (s: string) => s.replace(UNSTORABLE_ALL, '\uFFFD');

/** What is wrong with a value: text PostgreSQL cannot store, a number JSON cannot hold, or nesting past the limit. */
export interface Unstorable {
  /** Where, as path segments from the value's root. */
  path: (string | number)[];
  problem: 'text' | 'number' | 'depth';
}

/**
 * The first place in `value` PostgreSQL cannot store, or undefined. With `maxDepth`, nesting
 * deeper than that many objects/arrays is a finding too, and the walk never goes deeper: a
 * body nested 100,000 levels costs 64 steps, not a stack overflow.
 */
export function findUnstorable(value: unknown, maxDepth = Infinity): Unstorable | undefined {
  // Every request body passes here: the path is built only on the way out of a finding.
  const path: (string | number)[] = [];
  const problem = walk(value, path, 0, maxDepth);
  return problem ? { path: path.reverse(), problem } : undefined;
}

/** A finding in `value` (then `path` gets its location, innermost first), or undefined. */
function walk(value: unknown, path: (string | number)[], depth: number, maxDepth: number): Unstorable['problem'] | undefined {
  if (typeof value === 'string') return storable(value) ? undefined : 'text';
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : 'number';
  if (!value || typeof value !== 'object') return undefined;
  if (depth >= maxDepth) return 'depth';
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const problem = walk(value[i], path, depth + 1, maxDepth);
      if (problem) {
        path.push(i);
        return problem;
      }
    }
    return undefined;
  }
  for (const k in value) {
    if (!Object.hasOwn(value, k)) continue;
    const problem = storable(k) ? walk((value as Record<string, unknown>)[k], path, depth + 1, maxDepth) : 'text';
    if (problem) {
      path.push(k);
      return problem;
    }
  }
  return undefined;
}

/** What replaces a part nested past the limit in text the service keeps anyway (`storableText`). */
export const TOO_DEEP = '[omitted: nested deeper than the limit]';

/**
 * `value` with every U+0000 and unpaired surrogate in its strings and keys replaced by U+FFFD,
 * every number past the double range by null (what JSON makes of it anyway, said here rather
 * than left to the serialiser) and, with `maxDepth`, every object or array nested deeper
 * replaced by TOO_DEEP: for input already acknowledged (a platform's delivery), which must be
 * recorded rather than refused.
 */
export function storableText<T>(value: T, maxDepth = Infinity): T {
  if (findUnstorable(value, maxDepth) === undefined) return value;
  const clean = (v: unknown, depth: number): unknown => {
    if (typeof v === 'string') return repaired(v);
    if (typeof v === 'number') return Number.isFinite(v) ? v : null;
    if (!v || typeof v !== 'object') return v;
    if (depth >= maxDepth) return TOO_DEEP;
    if (Array.isArray(v)) return v.map((x) => clean(x, depth + 1));
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [repaired(k), clean(x, depth + 1)]));
  };
  return clean(value, 0) as T;
}

const MESSAGE = 'Strings must not contain the NUL character (U+0000) or unpaired surrogates';
const NUMBER_MESSAGE = 'Numbers must be finite: JSON cannot hold one beyond ±1.7976931348623157e308';

/**
 * Express middleware after the JSON parser, the one entrance check of API input: a body or
 * query parameter holding unstorable text or a number past the double range, or a body nested
 * deeper than `maxDepth` (JSON_MAX_DEPTH), is a VALIDATION_ERROR naming where — before
 * anything is queued. GraphQL requests (both endpoints) come through here too, their variables
 * included; their inline literals meet the same check in `storableLiterals`.
 */
export function rejectUnstorableInput(maxDepth: number) {
  return (req: { body?: unknown; query?: unknown }, _res: unknown, next: (err?: unknown) => void): void => {
    next(unstorableError(req.body, [], maxDepth) ?? unstorableError(req.query, [], maxDepth));
  };
}

/**
 * The VALIDATION_ERROR for client input holding unstorable text, a number past the double
 * range or nesting deeper than `maxDepth`, naming where (below `at`), or undefined when all of
 * it can be stored.
 */
export function unstorableError(value: unknown, at: (string | number)[] = [], maxDepth = Infinity): AppError | undefined {
  const found = findUnstorable(value, maxDepth);
  if (!found) return undefined;
  const path = [...at, ...found.path];
  switch (found.problem) {
    case 'text':
      return new AppError('VALIDATION_ERROR', MESSAGE, [{ path, message: 'not storable text' }]);
    case 'number':
      return new AppError('VALIDATION_ERROR', NUMBER_MESSAGE, [{ path, message: 'not a finite number' }]);
    case 'depth':
      return new AppError('VALIDATION_ERROR', `JSON must not be nested deeper than ${maxDepth} levels`, [
        { path, message: `nested deeper than ${maxDepth} levels` },
      ]);
  }
}

/**
 * GraphQL validation rule: the values written inline in a document (arguments, directive
 * arguments, variable defaults) meet the entrance check of JSON input. Each is taken as the
 * JSON it stands for, under its argument's name the way a REST body holds its fields, so
 * `createEvent(payload: {…})` nests exactly as deep as `{"payload": {…}}` may, and a refusal
 * names the same path (`payload.n`). The document's size is the request body's
 * (BODY_LIMIT_BYTES) and its token count GRAPHQL_MAX_TOKENS, so no literal outgrows either.
 */
export function storableLiterals(maxDepth: number) {
  return (context: ValidationContext): ASTVisitor => {
    const check = (name: string, value: ValueNode) => {
      if (value.kind === Kind.VARIABLE) return; // its value is checked with the variables
      const err = unstorableError({ [name]: valueFromASTUntyped(value) }, [], maxDepth);
      if (err) context.reportError(new GraphQLError(err.message, { nodes: [value], originalError: err }));
    };
    return {
      Argument: (node) => check(node.name.value, node.value),
      VariableDefinition: (node) => {
        if (node.defaultValue) check(node.variable.name.value, node.defaultValue);
      },
    };
  };
}

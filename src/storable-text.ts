import { GraphQLError, type ASTVisitor, type ValidationContext } from 'graphql';
import { AppError } from './errors.js';

/**
 * PostgreSQL cannot store U+0000 nor an unpaired UTF-16 surrogate (`"\ud800"` in JSON) in
 * `text` or `jsonb` (SQLSTATE 22P05 / 22021). A string carrying one would fail its insert — a
 * 500 in a request, and in a worker a job that fails on every attempt. So client input that
 * holds one is refused at the door, and text the service must accept anyway (a platform's
 * delivery, already acknowledged) has it replaced by U+FFFD before it is stored.
 */
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'g');
const storable = (s: string) => !UNSTORABLE.test(s);
const repaired = (s: string) => s.replace(UNSTORABLE_ALL, '\uFFFD');

/** The path of the first string or key PostgreSQL cannot store, or undefined. */
export function findUnstorable(value: unknown): (string | number)[] | undefined {
  // Every request body passes here: the path is built only on the way out of a finding.
  const path: (string | number)[] = [];
  return walk(value, path) ? path.reverse() : undefined;
}

/** True when `value` holds unstorable text; then `path` gets its location, innermost first. */
function walk(value: unknown, path: (string | number)[]): boolean {
  if (typeof value === 'string') return !storable(value);
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      if (walk(value[i], path)) return path.push(i) > 0;
    }
    return false;
  }
  if (value && typeof value === 'object') {
    for (const k in value) {
      if (!Object.hasOwn(value, k)) continue;
      if (!storable(k) || walk((value as Record<string, unknown>)[k], path)) return path.push(k) > 0;
    }
  }
  return false;
}

/** `value` with every U+0000 and unpaired surrogate in its strings and keys replaced by U+FFFD. */
export function storableText<T>(value: T): T {
  if (findUnstorable(value) === undefined) return value;
  const clean = (v: unknown): unknown => {
    if (typeof v === 'string') return repaired(v);
    if (Array.isArray(v)) return v.map(clean);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [repaired(k), clean(x)]));
    return v;
  };
  return clean(value) as T;
}

const MESSAGE = 'Strings must not contain the NUL character (U+0000) or unpaired surrogates';

/**
 * Express middleware after the JSON parser: such a body or query parameter is a
 * VALIDATION_ERROR naming where (query values reach SQL filters as body fields reach rows).
 */
export function rejectUnstorableBody(req: { body?: unknown; query?: unknown }, _res: unknown, next: (err?: unknown) => void): void {
  next(unstorableError(req.body) ?? unstorableError(req.query));
}

/**
 * The VALIDATION_ERROR for client input holding unstorable text, naming where (below `at`),
 * or undefined when all of it can be stored. For input that does not arrive as a JSON body
 * (multipart file names and fields).
 */
export function unstorableError(value: unknown, at: (string | number)[] = []): AppError | undefined {
  const path = findUnstorable(value);
  return path === undefined ? undefined : new AppError('VALIDATION_ERROR', MESSAGE, [{ path: [...at, ...path], message: 'not storable text' }]);
}

/** GraphQL validation rule: such a string literal (`"\u0000"` in the document) is refused. */
export function storableLiterals(context: ValidationContext): ASTVisitor {
  return {
    StringValue(node) {
      if (!storable(node.value)) context.reportError(new GraphQLError(MESSAGE, { nodes: [node], extensions: { code: 'VALIDATION_ERROR' } }));
    },
  };
}

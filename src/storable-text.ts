import { GraphQLError, type ASTVisitor, type ValidationContext } from 'graphql';
import { AppError } from './errors.js';

/**
 * PostgreSQL cannot store U+0000 nor an unpaired UTF-16 surrogate (`"\ud800"` in JSON) in
 * `text` or `jsonb` (SQLSTATE 22P05 / 22021). A string carrying one would fail its insert — a
 * 500 in a request, and in a worker a job that fails on every attempt. So client input that
 * holds one is refused at the door, and text the service must accept anyway (a platform's
 * delivery, already acknowledged) has it replaced by U+FFFD before it is stored.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL is one of the things PostgreSQL cannot store.
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const UNSTORABLE_ALL = new RegExp(UNSTORABLE.source, 'g');
const storable = (s: string) => !UNSTORABLE.test(s);
const repaired = (s: string) => s.replace(UNSTORABLE_ALL, '\uFFFD');

/** What is wrong with a value: text PostgreSQL cannot store, or nesting past the limit. */
export interface Unstorable {
  /** Where, as path segments from the value's root. */
  path: (string | number)[];
  problem: 'text' | 'depth';
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
 * `value` with every U+0000 and unpaired surrogate in its strings and keys replaced by U+FFFD
 * and, with `maxDepth`, every object or array nested deeper replaced by TOO_DEEP: for input
 * already acknowledged (a platform's delivery), which must be recorded rather than refused.
 */
export function storableText<T>(value: T, maxDepth = Infinity): T {
  if (findUnstorable(value, maxDepth) === undefined) return value;
  const clean = (v: unknown, depth: number): unknown => {
    if (typeof v === 'string') return repaired(v);
    if (!v || typeof v !== 'object') return v;
    if (depth >= maxDepth) return TOO_DEEP;
    if (Array.isArray(v)) return v.map((x) => clean(x, depth + 1));
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [repaired(k), clean(x, depth + 1)]));
  };
  return clean(value, 0) as T;
}

const MESSAGE = 'Strings must not contain the NUL character (U+0000) or unpaired surrogates';

/**
 * Express middleware after the JSON parser, the one entrance check of API input: a body or
 * query parameter holding unstorable text, or a body nested deeper than `maxDepth`
 * (JSON_MAX_DEPTH), is a VALIDATION_ERROR naming where — before anything is queued. GraphQL
 * requests (both endpoints) come through here too, their variables included.
 */
export function rejectUnstorableInput(maxDepth: number) {
  return (req: { body?: unknown; query?: unknown }, _res: unknown, next: (err?: unknown) => void): void => {
    next(unstorableError(req.body, [], maxDepth) ?? unstorableError(req.query, [], maxDepth));
  };
}

/**
 * The VALIDATION_ERROR for client input holding unstorable text or nested deeper than
 * `maxDepth`, naming where (below `at`), or undefined when all of it can be stored.
 */
export function unstorableError(value: unknown, at: (string | number)[] = [], maxDepth = Infinity): AppError | undefined {
  const found = findUnstorable(value, maxDepth);
  if (!found) return undefined;
  const path = [...at, ...found.path];
  return found.problem === 'text'
    ? new AppError('VALIDATION_ERROR', MESSAGE, [{ path, message: 'not storable text' }])
    : new AppError('VALIDATION_ERROR', `JSON must not be nested deeper than ${maxDepth} levels`, [
        { path, message: `nested deeper than ${maxDepth} levels` },
      ]);
}

/** GraphQL validation rule: such a string literal (`"\u0000"` in the document) is refused. */
export function storableLiterals(context: ValidationContext): ASTVisitor {
  return {
    StringValue(node) {
      if (!storable(node.value))
        context.reportError(new GraphQLError(MESSAGE, { nodes: [node], extensions: { code: 'VALIDATION_ERROR' } }));
    },
  };
}

import { GraphQLError, type ASTVisitor, type ValidationContext } from 'graphql';
import { AppError } from './errors.js';

/**
 * PostgreSQL cannot store U+0000 in `text` or `jsonb` (SQLSTATE 22P05 / 22021). A string
 * carrying one would fail its insert — a 500 in a request, and in a worker a job that fails
 * on every attempt, taking the rest of its group-commit batch with it. So client input that
 * holds one is refused at the door, and text the service must accept anyway (a platform's
 * delivery, already acknowledged) has it replaced before it is stored.
 */
const NUL = '\u0000';
/**
 * An unpaired UTF-16 surrogate: JSON.stringify writes it as `\udXXX`, which `jsonb` refuses
 * (invalid input syntax) just as it refuses U+0000, so it gets the same treatment.
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

/** True when PostgreSQL can store the string in `text` and `jsonb`. */
const storable = (s: string) => !s.includes(NUL) && !LONE_SURROGATE.test(s);
const makeStorable = (s: string) => s.replaceAll(NUL, '\uFFFD').replace(LONE_SURROGATES, '\uFFFD');

/** The path of the first string or key holding U+0000, or undefined. */
export function findNul(value: unknown, path: (string | number)[] = []): (string | number)[] | undefined {
  if (typeof value === 'string') return storable(value) ? undefined : path;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const p = findNul(value[i], [...path, i]);
      if (p) return p;
    }
    return undefined;
  }
  if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (!storable(k)) return [...path, k];
      const p = findNul(v, [...path, k]);
      if (p) return p;
    }
  }
  return undefined;
}

/** `value` with every U+0000 and unpaired surrogate in strings and keys replaced by U+FFFD (the replacement character). */
export function withoutNul<T>(value: T): T {
  if (findNul(value) === undefined) return value;
  const clean = (v: unknown): unknown => {
    if (typeof v === 'string') return makeStorable(v);
    if (Array.isArray(v)) return v.map(clean);
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [makeStorable(k), clean(x)]));
    return v;
  };
  return clean(value) as T;
}

/** Express middleware after the JSON parser: a body holding U+0000 is a VALIDATION_ERROR naming where. */
export function rejectNulInBody(req: { body?: unknown }, _res: unknown, next: (err?: unknown) => void): void {
  const path = findNul(req.body);
  if (path === undefined) return next();
  next(new AppError('VALIDATION_ERROR', 'Strings must not contain the NUL character (U+0000) or unpaired surrogates', [{ path, message: 'contains U+0000 or an unpaired surrogate' }]));
}

/** GraphQL validation rule: a string literal holding U+0000 (written `\u0000` in the document) is refused. */
export function noNulLiterals(context: ValidationContext): ASTVisitor {
  return {
    StringValue(node) {
      if (!storable(node.value)) {
        context.reportError(new GraphQLError('Strings must not contain the NUL character (U+0000) or unpaired surrogates', { nodes: [node], extensions: { code: 'VALIDATION_ERROR' } }));
      }
    },
  };
}

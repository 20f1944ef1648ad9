/**
 * The one event-type matcher, shared by webhook subscriptions and stream filters. fnmatch
 * semantics: `*` any run of characters, `?` one character, `[abc]` / `[a-z]` a
 * class (`[!…]` negated, a `]` right after the opening bracket is a member); so `message.*`
 * matches `message.inbound`, and `*` matches everything.
 *
 * Patterns are tenant input matched on shared processes (the ledger's fan-out, every stream),
 * so matching never backtracks: a backtracking RegExp made `*a*a*a*a*a*a*b` cost seconds
 * against a 60-character type. Here a match walks the type once per star at most
 * (O(pattern × type), each under 200 characters), and a malformed pattern is refused when it
 * is written rather than failing every batch that meets it.
 */
export type Matcher = (eventType: string) => boolean;

type Token =
  | { kind: 'char'; c: string }
  | { kind: 'one' }
  | { kind: 'star' }
  | { kind: 'class'; negate: boolean; ranges: [string, string][] };

/** Why a pattern cannot be used, or undefined when it parses. */
export function patternProblem(pattern: string): string | undefined {
  const parsed = parse(pattern);
  return typeof parsed === 'string' ? parsed : undefined;
}

function parse(pattern: string): Token[] | string {
  const tokens: Token[] = [];
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*') {
      // Consecutive stars are one star: matching cost depends on stars, not their spelling.
      if (tokens.at(-1)?.kind !== 'star') tokens.push({ kind: 'star' });
    } else if (c === '?') tokens.push({ kind: 'one' });
    else if (c === '[') {
      let j = i + 1;
      const negate = pattern[j] === '!';
      if (negate) j++;
      const start = j;
      const ranges: [string, string][] = [];
      // A `]` first in the class is a member, as in fnmatch.
      while (j < pattern.length && (pattern[j] !== ']' || j === start)) {
        const lo = pattern[j];
        if (pattern[j + 1] === '-' && j + 2 < pattern.length && pattern[j + 2] !== ']') {
          const hi = pattern[j + 2];
          if (lo > hi) return `the range ${lo}-${hi} in a [...] class is reversed`;
          ranges.push([lo, hi]);
          j += 3;
        } else {
          ranges.push([lo, lo]);
          j++;
        }
      }
      if (j >= pattern.length) return 'a [ opens a character class that is never closed with ]';
      tokens.push({ kind: 'class', negate, ranges });
      i = j;
    } else if (c === ']') return 'a ] closes no character class';
    else tokens.push({ kind: 'char', c });
  }
  return tokens;
}

function accepts(t: Token, c: string): boolean {
  switch (t.kind) {
    case 'char':
      return t.c === c;
    case 'one':
      return true;
    case 'class':
      return t.ranges.some(([lo, hi]) => c >= lo && c <= hi) !== t.negate;
    case 'star':
      return false;
  }
}

/**
 * Greedy wildcard matching: on a mismatch, only the most recent star takes one more
 * character. Earlier stars never need to be revisited (whatever they could have absorbed the
 * latest one can), which is what bounds the work.
 */
function matchTokens(tokens: Token[], s: string): boolean {
  let p = 0;
  let i = 0;
  let starP = -1;
  let starI = 0;
  while (i < s.length) {
    const t = tokens[p];
    if (t?.kind === 'star') {
      starP = p++;
      starI = i;
    } else if (t && accepts(t, s[i])) {
      p++;
      i++;
    } else if (starP >= 0) {
      p = starP + 1;
      i = ++starI;
    } else return false;
  }
  while (tokens[p]?.kind === 'star') p++;
  return p === tokens.length;
}

const cache = new Map<string, Matcher>();
const NOTHING: Matcher = () => false;

function compileOne(pattern: string): Matcher {
  let m = cache.get(pattern);
  if (m) return m;
  const tokens = parse(pattern);
  // Only a pattern stored before patterns were checked can fail here: it matches nothing
  // rather than failing the batch (and the other tenants' events in it) that meets it.
  m = typeof tokens === 'string' ? NOTHING : (s: string) => matchTokens(tokens, s);
  if (cache.size > 10_000) cache.clear();
  cache.set(pattern, m);
  return m;
}

export function matchesPattern(pattern: string, eventType: string): boolean {
  return compileOne(pattern)(eventType);
}

/** A matcher for "any of these patterns"; an empty list matches nothing. */
export function compileMatcher(patterns: readonly string[]): Matcher {
  if (patterns.includes('*')) return () => true;
  const ms = patterns.map(compileOne);
  return (t) => ms.some((m) => m(t));
}

/** Valid pattern text: event-type characters plus the wildcards (well-formedness is `patternProblem`). */
export const PATTERN_RE = /^[a-z0-9_.*?[\]!-]+$/;

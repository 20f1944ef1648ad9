/**
 * The one event-type matcher, shared by webhook subscriptions and stream filters. fnmatch
 * semantics (SPEC 6.2): `*` any run of characters, `?` one character, `[abc]` a class; so
 * `message.*` matches `message.inbound`, and `*` matches everything.
 */
export type Matcher = (eventType: string) => boolean;

const cache = new Map<string, RegExp>();

function toRegExp(pattern: string): RegExp {
  let re = cache.get(pattern);
  if (re) return re;
  let src = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*') src += '.*';
    else if (c === '?') src += '.';
    else if (c === '[') {
      const close = pattern.indexOf(']', i + 2);
      if (close === -1) src += '\\[';
      else {
        let body = pattern.slice(i + 1, close);
        const negate = body.startsWith('!');
        if (negate) body = body.slice(1);
        src += `[${negate ? '^' : ''}${body.replace(/[\\\]^]/g, '\\$&')}]`;
        i = close;
      }
    } else src += c.replace(/[.+^${}()|\\]/g, '\\$&');
  }
  re = new RegExp(`^${src}$`);
  if (cache.size > 10_000) cache.clear();
  cache.set(pattern, re);
  return re;
}

export function matchesPattern(pattern: string, eventType: string): boolean {
  return toRegExp(pattern).test(eventType);
}

/** A matcher for "any of these patterns"; an empty list matches nothing. */
export function compileMatcher(patterns: readonly string[]): Matcher {
  const res = patterns.map(toRegExp);
  if (patterns.includes('*')) return () => true;
  return (t) => res.some((r) => r.test(t));
}

/** Valid pattern text: event-type characters plus the wildcards. */
export const PATTERN_RE = /^[a-z0-9_.*?[\]!-]+$/;

import { compileMatcher, type Matcher } from './patterns.js';

/**
 * The event-type filter shared by webhook subscriptions and the event stream: does any of
 * `patterns` (exact type, `prefix.*`, `*`, fnmatch semantics) match `eventType`? The pattern
 * compiler itself lives in patterns.ts; this is the entry both consumers call, so the rule
 * has one implementation.
 */
export function matchesEventType(patterns: readonly string[], eventType: string): boolean {
  return compileEventTypeMatcher(patterns)(eventType);
}

/** The same rule compiled once, for callers that test many events against one pattern list. */
export function compileEventTypeMatcher(patterns: readonly string[]): Matcher {
  return compileMatcher(patterns);
}

export { PATTERN_RE as EVENT_PATTERN_RE } from './patterns.js';

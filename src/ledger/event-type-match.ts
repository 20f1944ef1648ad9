import { compileMatcher, type Matcher } from './patterns.js';

/**
 * The event-type pattern API that webhook subscriptions and the event stream both use
 * (SPEC 6.2 / 4.4: exact type, `prefix.*`, `*`, fnmatch semantics). A thin named face over
 * ./patterns.ts, so there is still one implementation of the rule.
 */
export type EventTypeMatcher = Matcher;

/** Compiles a pattern list once; reuse the result on hot paths (fan-out, stream tails). */
export function compileEventTypePatterns(patterns: readonly string[]): EventTypeMatcher {
  return compileMatcher(patterns);
}

/** True when any pattern matches; an empty list matches nothing. */
export function matchesEventType(patterns: readonly string[], eventType: string): boolean {
  return compileMatcher(patterns)(eventType);
}

export { PATTERN_RE as EVENT_PATTERN_RE } from './patterns.js';

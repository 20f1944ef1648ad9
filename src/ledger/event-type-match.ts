import { z } from 'zod';
import { compileMatcher, PATTERN_RE, patternProblem, type Matcher } from './patterns.js';

/**
 * The event-type pattern API that webhook subscriptions and the event stream both use
 * (exact type, `prefix.*`, `*`, fnmatch semantics). A thin named face over
 * ./patterns.ts, so there is still one implementation of the rule.
 */
export type EventTypeMatcher = (event: MatchableEvent) => boolean;

/** What matching reads of an event: its stored type and its alias (eventAlias in ./event-types.ts). */
export interface MatchableEvent {
  event_type: string;
  event_alias: string | null;
}

/**
 * Compiles a pattern list once; reuse the result on hot paths (fan-out, stream tails). An
 * event matches when a pattern matches its stored type or its alias: `message.read` and
 * `message.*` both select a `message.status` whose status is `read`, once.
 */
export function compileEventTypePatterns(patterns: readonly string[]): EventTypeMatcher {
  const matches: Matcher = compileMatcher(patterns);
  return (e) => matches(e.event_type) || (e.event_alias !== null && matches(e.event_alias));
}

/**
 * One event-type pattern as every face accepts it (webhook subscriptions on REST and GraphQL,
 * stream filters on SSE and GraphQL): a malformed one is a VALIDATION_ERROR when written.
 */
export const eventPatternSchema = z
  .string()
  .min(1)
  .max(200)
  .regex(PATTERN_RE, 'an event type or an fnmatch pattern such as message.* or *')
  .superRefine((p, ctx) => {
    const problem = patternProblem(p);
    if (problem) ctx.addIssue({ code: 'custom', message: `not a valid pattern: ${problem}` });
  });

import { z } from 'zod';
import { compileMatcher, PATTERN_RE, patternProblem, type Matcher } from './patterns.js';

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

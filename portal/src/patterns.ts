/**
 * Event-type patterns as the service checks them: the service's own matcher module (pure,
 * no imports), bundled here so the portal's live validation is the same rule, not a copy.
 */
import { compileMatcher, PATTERN_RE, patternProblem } from '../../src/ledger/patterns.ts';

/** The catalog's event types, offered as examples of what a pattern list matches. */
const KNOWN_TYPES = [
  'message.inbound',
  'message.outbound',
  'message.delivered',
  'message.read',
  'message.failed',
  'message.status',
  'message.reaction',
  'link_code.generated',
  'link_code.activation',
  'user.merged',
];

export const splitPatterns = (text: string) =>
  text
    .split(/[\s,]+/)
    .map((p) => p.trim())
    .filter(Boolean);

/** The first problem in a pattern list, or undefined when every pattern parses. */
export function patternListProblem(patterns: string[]): string | undefined {
  for (const p of patterns) {
    if (p.length > 200) return `"${p.slice(0, 20)}…" is longer than 200 characters`;
    if (!PATTERN_RE.test(p)) return `"${p}": an event type or an fnmatch pattern such as message.* or *`;
    const problem = patternProblem(p);
    if (problem) return `"${p}": ${problem}`;
  }
  return undefined;
}

/** Which of the known types (and the extra ones given) the patterns match. */
export function matchingTypes(patterns: string[], extra: string[] = []): string[] {
  if (patterns.length === 0 || patternListProblem(patterns)) return [];
  const match = compileMatcher(patterns);
  return [...new Set([...KNOWN_TYPES, ...extra])].filter(match);
}

import { unverifiedCertificate } from './tls.js';
import type { SendResult } from './types.js';

/** What a broker said of one publish: delivered (confirmed, acked), or why not and whether for good. */
export type Outcome = { delivered: boolean; error?: string; permanent?: boolean };

/**
 * The SendResult of a publish started at `started` (performance.now()) with `requestHeaders`,
 * in the HTTP client's shape the delivery log keeps: a broker has no response headers or body.
 */
export const sendResult =
  (requestHeaders: Record<string, string>, started: number) =>
  (outcome: Outcome): SendResult => ({
    headers: {},
    responseBody: '',
    requestHeaders,
    durationMs: Math.round(performance.now() - started),
    ...outcome,
  });

/** What the delivery log says of a broker error nothing more specific names: its code and message, or the certificate that did not verify. */
export function describeBrokerError(err: unknown): string {
  const e = err as Error & { code?: unknown };
  return unverifiedCertificate(err) ?? `${typeof e?.code === 'string' ? `${e.code}: ` : ''}${e?.message ?? String(err)}`;
}

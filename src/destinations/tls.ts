import { rootCertificates } from 'node:tls';

/**
 * The authorities a broker's TLS certificate is verified against, as one PEM text: Node's
 * bundle plus the operator's (DESTINATION_CA_FILE, read once by src/config.ts); undefined keeps
 * Node's own default. Given alone, `ca` would replace the bundle and public brokers would stop
 * verifying.
 */
export const trustedCa = (extraCa: string | undefined): string | undefined =>
  extraCa ? [...rootCertificates, extraCa].join('\n') : undefined;

/** Node's codes for a certificate it would not accept: an unknown or self-signed issuer, expired, another name. */
const UNVERIFIED = /^(UNABLE_TO_|SELF_SIGNED_CERT|DEPTH_ZERO_SELF_SIGNED_CERT|CERT_|ERR_TLS_CERT_ALTNAME)/;

/**
 * What the delivery log says of a broker certificate that did not verify, or undefined for any
 * other error. Retried like an unreachable broker, not failed at once: the fix (a renewed or
 * completed chain on the broker, its CA added to DESTINATION_CA_FILE) does not change the
 * subscription, and the next attempt after it succeeds.
 */
export function unverifiedCertificate(err: unknown): string | undefined {
  const e = err as { code?: unknown; message?: unknown } | undefined;
  return typeof e?.code === 'string' && UNVERIFIED.test(e.code)
    ? `the broker's TLS certificate did not verify (${e.code}: ${String(e.message)})`
    : undefined;
}

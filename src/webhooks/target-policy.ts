import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { fail, ok, type Result } from '../errors.js';

/** `public-https`: HTTPS to public addresses only. `any`: anything http(s) (development, tests). */
export type TargetPolicy = 'public-https' | 'any';

/** Addresses a webhook may never reach under `public-https` (RFC 6890 special-purpose and friends). */
const BLOCKED = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16],
  ['172.16.0.0', 12], ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16],
  ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) BLOCKED.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128], ['::1', 128], ['64:ff9b::', 96], ['64:ff9b:1::', 48], ['100::', 64], ['2001::', 32], ['2001:db8::', 32],
  ['2002::', 16], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8],
] as const) BLOCKED.addSubnet(net, prefix, 'ipv6');

/** True for an address a public-internet receiver may have. IPv4-mapped IPv6 is judged as IPv4. */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 0) return false;
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped) return isPublicAddress(mapped[1]);
    if (/^::ffff:/i.test(address)) return false;
    return !BLOCKED.check(address, 'ipv6');
  }
  return !BLOCKED.check(address, 'ipv4');
}

/**
 * Checks a target URL when a subscription is created or changed: a URL, http(s), credential-free,
 * and under `public-https` an https URL whose host, when it is an address literal, is public.
 * Host names are judged on their resolved address at send time (see guardedLookup).
 */
export function checkTargetUrl(raw: string, policy: TargetPolicy): Result<URL> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return fail('VALIDATION_ERROR', 'target_url is not a URL', [{ path: ['target_url'], message: 'not a URL' }]);
  }
  const bad = (message: string) => fail('INVALID_WEBHOOK_TARGET', `target_url refused: ${message}`, [{ path: ['target_url'], message }]);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return bad('must be an http(s) URL');
  if (url.username || url.password) return bad('must not carry credentials');
  if (policy === 'any') return ok(url);
  if (url.protocol !== 'https:') return bad('must use https');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) && !isPublicAddress(host)) return bad(`${host} is not a public address`);
  return ok(url);
}

/** The error a refused resolution raises; the delivery records its message. */
export class TargetRefusedError extends Error {
  readonly code = 'ETARGETREFUSED';
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for the HTTP client's sockets that refuses non-public addresses. The check runs
 * on the address the socket will actually connect to, so DNS rebinding between a check and
 * the connect cannot slip through.
 */
export function guardedLookup(hostname: string, options: object, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const list = addresses as LookupAddress[];
    const refused = list.find((a) => !isPublicAddress(a.address));
    if (refused || list.length === 0) {
      return callback(new TargetRefusedError(`refused: ${hostname} resolves to non-public address ${refused?.address ?? '(none)'}`), []);
    }
    const all = (options as { all?: boolean }).all;
    if (all) callback(null, list);
    else callback(null, list[0].address, list[0].family);
  });
}

import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { Agent } from 'undici';
import { fail, ok, type ErrorCode, type Result } from '../errors.js';

/**
 * The one address policy for every request the service makes on a tenant's behalf: webhook
 * deliveries, inbound media downloads, platform API calls to a connection's `api_base_url`
 * (OUTBOUND_ADDRESS_POLICY). `public-https`: HTTPS to public addresses only, judged on the
 * address actually connected to. `any`: anything http(s) (development, tests).
 */
export type OutboundPolicy = 'public-https' | 'any';
/** The name the policy had when it covered webhooks only. */
export type TargetPolicy = OutboundPolicy;

/**
 * Addresses never reached under `public-https` (RFC 6890 special-purpose and friends). In IPv6:
 * `::/96` is IPv4-compatible (`::127.0.0.1`), 64:ff9b::/96 NAT64 and 2002::/16 6to4 embed an IPv4
 * address a gateway would reach; IPv4-mapped `::ffff:a.b.c.d` is judged as its IPv4 address.
 */
const BLOCKED = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  BLOCKED.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 96],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001::', 32],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
] as const)
  BLOCKED.addSubnet(net, prefix, 'ipv6');

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
 * Checks a URL a tenant gives when it is written (a webhook target, a connection's
 * `api_base_url`): a URL, http(s), credential-free, and under `public-https` an https URL whose
 * host, when it is an address literal, is public. Host names are judged on their resolved
 * address when connecting (see guardedLookup), so DNS cannot be changed in between.
 */
export function checkOutboundUrl(raw: string, policy: OutboundPolicy, field: (string | number)[], code: ErrorCode): Result<URL> {
  const name = field.join('.');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return fail('VALIDATION_ERROR', `${name} is not a URL`, [{ path: field, message: 'not a URL' }]);
  }
  const bad = (message: string) => fail(code, `${name} refused: ${message}`, [{ path: field, message }]);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return bad('must be an http(s) URL');
  if (url.username || url.password) return bad('must not carry credentials');
  if (policy === 'any') return ok(url);
  if (url.protocol !== 'https:') return bad('must use https');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) && !isPublicAddress(host)) return bad(`${host} is not a public address`);
  return ok(url);
}

/** A webhook subscription's target URL (INVALID_WEBHOOK_TARGET when the policy refuses it). */
export const checkTargetUrl = (raw: string, policy: OutboundPolicy): Result<URL> =>
  checkOutboundUrl(raw, policy, ['target_url'], 'INVALID_WEBHOOK_TARGET');

/**
 * Whether a request to `url` may go out under `policy`: an address-literal host is judged
 * here (no lookup happens for it); a host name is judged by guardedLookup at connect time.
 * Answers why not, or undefined.
 */
export function refusedUrl(url: URL, policy: OutboundPolicy): string | undefined {
  if (policy === 'any') return undefined;
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'not an http(s) URL';
  return refusedHost(url.hostname, policy);
}

/** `refusedUrl` for a bare host (an SMTP server): address literals judged, names left to the lookup. */
export function refusedHost(hostname: string, policy: OutboundPolicy): string | undefined {
  if (policy === 'any') return undefined;
  const host = hostname.replace(/^\[|\]$/g, '');
  return isIP(host) && !isPublicAddress(host) ? `${host} is not a public address` : undefined;
}

/**
 * Resolves `hostname` and judges every address (for clients that take no lookup function,
 * like the SMTP transport). Weaker than guardedLookup: DNS could answer differently at
 * connect time, so it only narrows what a tenant can reach.
 */
export async function checkResolvedHost(hostname: string, policy: OutboundPolicy): Promise<string | undefined> {
  if (policy === 'any') return undefined;
  const literal = refusedHost(hostname, policy);
  if (literal || isIP(hostname.replace(/^\[|\]$/g, ''))) return literal;
  const { lookup } = await import('node:dns/promises');
  const addresses = await lookup(hostname, { all: true }).catch(() => []);
  const bad = addresses.find((a) => !isPublicAddress(a.address));
  return bad ? `${hostname} resolves to non-public address ${bad.address}` : undefined;
}

/** Connections whose sockets only reach addresses guardedLookup accepts (shared keep-alive pool). */
let guardedAgent: Agent | undefined;
export function guardedDispatcher(): Agent {
  guardedAgent ??= new Agent({ connect: { lookup: guardedLookup as never } });
  return guardedAgent;
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

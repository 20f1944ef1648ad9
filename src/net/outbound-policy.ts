import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP } from 'node:net';
import { Agent } from 'undici';
import { fail, ok, type ErrorCode, type Result } from '../errors.js';

/**
 * The one address policy for every connection the service makes on a tenant's behalf: webhook
 * deliveries, inbound media downloads, platform API calls to a connection's `api_base_url`, its
 * SMTP server (OUTBOUND_ADDRESS_POLICY). `public-https`: HTTPS (SMTP for mail) to public
 * addresses only, judged on the address actually connected to. `any`: anything of the right
 * protocol (development, tests).
 */
export type OutboundPolicy = 'public-https' | 'any';

/**
 * Addresses never reached under `public-https` (RFC 6890 special-purpose and friends). In IPv6:
 * `::/96` is IPv4-compatible (`::127.0.0.1`), 64:ff9b::/96 NAT64 and 2002::/16 6to4 embed an IPv4
 * address a gateway would reach; IPv4-mapped `::ffff:a.b.c.d` is judged as its IPv4 address, and
 * any other `::ffff:` address (IPv4-translated `::ffff:0:a.b.c.d`) is refused.
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
    // The URL parser spells ::ffff:8.8.8.8 as ::ffff:808:808.
    const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
    if (hex) {
      const [hi, lo] = [parseInt(hex[1], 16), parseInt(hex[2], 16)];
      return isPublicAddress(`${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`);
    }
    if (/^::ffff:/i.test(address)) return false;
    return !BLOCKED.check(address, 'ipv6');
  }
  return !BLOCKED.check(address, 'ipv4');
}

/** The protocol a URL field is spoken in; it decides the schemes the field may have. */
export type OutboundProtocol = 'http' | 'smtp' | 'amqp' | 'nats';

/** The schemes each protocol allows under each policy, and what a refusal says. */
const SCHEMES: Record<OutboundProtocol, Record<OutboundPolicy, { schemes: readonly string[]; refusal: string }>> = {
  http: {
    any: { schemes: ['http:', 'https:'], refusal: 'must be an http(s) URL' },
    'public-https': { schemes: ['https:'], refusal: 'must use https' },
  },
  smtp: {
    any: { schemes: ['smtp:', 'smtps:'], refusal: 'must be an smtp:// or smtps:// URL' },
    'public-https': { schemes: ['smtp:', 'smtps:'], refusal: 'must be an smtp:// or smtps:// URL' },
  },
  // A broker destination (src/destinations/rabbitmq): TLS is required outside development.
  amqp: {
    any: { schemes: ['amqp:', 'amqps:'], refusal: 'must be an amqp:// or amqps:// URL' },
    'public-https': { schemes: ['amqps:'], refusal: 'must use amqps' },
  },
  // A NATS JetStream destination (src/destinations/nats): `tls://` is NATS's spelling of TLS.
  nats: {
    any: { schemes: ['nats:', 'tls:'], refusal: 'must be a nats:// or tls:// URL' },
    'public-https': { schemes: ['tls:'], refusal: 'must use tls' },
  },
};

/**
 * The host a connection to `url` goes to, spelled the one way every check and connect uses
 * (IPv6 without brackets), or undefined when it names no host. Special schemes (http, https)
 * already spell every IPv4 form as the dotted address; other schemes (smtp) keep the host as
 * written, where `2130706433`, `0x7f000001`, `127.1.` or `127.0.0.%31` would pass for names
 * that the resolver (or the mail client) then reads as 127.0.0.1. So the host is re-read as an
 * http host is: the address it connects to is the address judged.
 */
function canonicalHost(url: URL): string | undefined {
  const host = url.hostname;
  if (host.startsWith('[')) return host.slice(1, -1);
  if (host === '') return undefined;
  try {
    return new URL(`http://${host}/`).hostname;
  } catch {
    return undefined;
  }
}

/** A tenant's URL as the policy judged it: where a connection would go, or why it may not. */
export type Judged = { ok: true; url: URL; host: string } | { ok: false; reason: string };

/**
 * The one judgement of a URL a tenant chose (a webhook target, a connection's `api_base_url` or
 * `smtp_url`, a media URL), made when it is written and again before every connection: a URL of
 * the field's protocol, https under `public-https`, and an address-literal host that is public.
 * A host name is judged on what it resolves to, when connecting (`resolveJudged`).
 */
export function judgeUrl(raw: string | URL, protocol: OutboundProtocol, policy: OutboundPolicy): Judged {
  let url: URL;
  try {
    url = typeof raw === 'string' ? new URL(raw) : raw;
  } catch {
    return { ok: false, reason: 'not a URL' };
  }
  const { schemes, refusal } = SCHEMES[protocol][policy];
  if (!schemes.includes(url.protocol)) return { ok: false, reason: refusal };
  // The mail and AMQP clients read connection options from the query (`proxy=`, `tls.…`, `frameMax=`): a tenant must not set them.
  if (protocol !== 'http' && (url.search || url.hash)) return { ok: false, reason: 'must not carry query options' };
  const host = canonicalHost(url);
  if (host === undefined) return { ok: false, reason: 'has no valid host' };
  if (policy === 'public-https' && isIP(host) && !isPublicAddress(host)) {
    const written = url.hostname.replace(/^\[|\]$/g, '');
    return { ok: false, reason: `${written === host ? host : `${written} is ${host}, which`} is not a public address` };
  }
  return { ok: true, url, host };
}

/**
 * Checks a URL a tenant gives when it is written (a webhook target, a connection's URL fields):
 * `judgeUrl`, and no credentials in an http(s) URL (they would be stored and shown in the clear;
 * an SMTP URL's are sealed with the connection's secrets).
 */
export function checkOutboundUrl(
  raw: string,
  protocol: OutboundProtocol,
  policy: OutboundPolicy,
  field: (string | number)[],
  code: ErrorCode,
): Result<URL> {
  const name = field.join('.');
  const judged = judgeUrl(raw, protocol, policy);
  const bad = (message: string) => fail(code, `${name} refused: ${message}`, [{ path: field, message }]);
  if (!judged.ok)
    return judged.reason === 'not a URL'
      ? fail('VALIDATION_ERROR', `${name} is not a URL`, [{ path: field, message: 'not a URL' }])
      : bad(judged.reason);
  if (protocol === 'http' && (judged.url.username || judged.url.password)) return bad('must not carry credentials');
  return ok(judged.url);
}

/** A webhook subscription's target URL (INVALID_WEBHOOK_TARGET when the policy refuses it). */
export const checkTargetUrl = (raw: string, policy: OutboundPolicy): Result<URL> =>
  checkOutboundUrl(raw, 'http', policy, ['target_url'], 'INVALID_WEBHOOK_TARGET');

/** Why an HTTP request to `url` may not go out under `policy` (`judgeUrl` at connect time), or undefined. */
export function refusedUrl(url: URL, policy: OutboundPolicy): string | undefined {
  const judged = judgeUrl(url, 'http', policy);
  return judged.ok ? undefined : judged.reason;
}

/**
 * What resolving a host for a connection gave: the addresses to connect to (and only those),
 * a refusal, or a lookup that failed for now (no connection either; the caller may retry).
 */
export type Resolution =
  | { kind: 'addresses'; addresses: LookupAddress[] }
  | { kind: 'refused'; reason: string }
  | { kind: 'failed'; error: NodeJS.ErrnoException };

/**
 * The step between a judgement and a connection, under `public-https`: resolves `host` (a
 * `judgeUrl` host) and judges every address. A name that resolves to nothing is refused, and a
 * failed lookup is never passed over: a client left to resolve the name its own way could reach
 * an address nobody judged (nodemailer reached 127.0.0.1 for `127.0.0.1.`, which the system
 * resolver does not know). The connection must go to the addresses answered, never to the name.
 */
function resolveJudged(host: string, options: object, callback: (r: Resolution) => void): void {
  const family = isIP(host);
  if (family !== 0) {
    const r: Resolution = isPublicAddress(host)
      ? { kind: 'addresses', addresses: [{ address: host, family }] }
      : { kind: 'refused', reason: `${host} is not a public address` };
    return void process.nextTick(callback, r);
  }
  dnsLookup(host, { ...options, all: true }, (err, answer) => {
    if (err) return callback({ kind: 'failed', error: err });
    const addresses = answer as LookupAddress[];
    const refused = addresses.find((a) => !isPublicAddress(a.address));
    if (refused) return callback({ kind: 'refused', reason: `${host} resolves to non-public address ${refused.address}` });
    if (addresses.length === 0) return callback({ kind: 'refused', reason: `${host} resolves to no address` });
    callback({ kind: 'addresses', addresses });
  });
}

/**
 * `resolveJudged` for clients that take no lookup function (the SMTP transport): connect to an
 * address it answers. A lookup still unanswered after `timeoutMs` counts as failed, so a slow
 * resolver cannot hold a send past its lease.
 */
export function resolvePublic(host: string, timeoutMs: number): Promise<Resolution> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      const error: NodeJS.ErrnoException = Object.assign(new Error(`lookup of ${host} timed out`), { code: 'ETIMEOUT' });
      resolve({ kind: 'failed', error });
    }, timeoutMs);
    resolveJudged(host, {}, (r) => {
      clearTimeout(timer);
      resolve(r);
    });
  });
}

/** Connections whose sockets only reach addresses guardedLookup accepts (shared keep-alive pool). */
let guardedAgent: Agent | undefined;
export function guardedDispatcher(): Agent {
  guardedAgent ??= new Agent({ connect: { lookup: guardedLookup as never } });
  return guardedAgent;
}

/**
 * The error a refused URL or resolution raises; the delivery records its message. `reason`
 * names the host and why (never a path or query: those may carry a token).
 */
export class TargetRefusedError extends Error {
  readonly code = 'ETARGETREFUSED';
  constructor(
    readonly reason: string,
    what = 'refused by the outbound address policy',
  ) {
    super(`${what}: ${reason}`);
  }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for the HTTP client's sockets that refuses non-public addresses (`resolveJudged`).
 * The check runs on the addresses the socket will actually connect to, so DNS rebinding between
 * a check and the connect cannot slip through.
 */
export function guardedLookup(hostname: string, options: object, callback: LookupCallback): void {
  resolveJudged(hostname.replace(/^\[|\]$/g, ''), options, (r) => {
    if (r.kind === 'failed') return callback(r.error, []);
    if (r.kind === 'refused') return callback(new TargetRefusedError(r.reason, 'refused'), []);
    const list = r.addresses;
    if ((options as { all?: boolean }).all) callback(null, list);
    else callback(null, list[0].address, list[0].family);
  });
}

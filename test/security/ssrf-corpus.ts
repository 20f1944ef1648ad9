import { createServer, type Server } from 'node:net';

/**
 * Ways to write a host that reaches the operator's own network: every URL field the service
 * connects to (src/net/outbound-policy.ts) is tried with each of them, when it is written and
 * when a connection is made (test/security/ssrf.test.ts, ssrf-fields.test.ts).
 */
export interface AddressForm {
  /** The host as written in a URL's authority (IPv6 in brackets). */
  host: string;
  what: string;
  /**
   * An address literal, however spelled: refused when the URL is written. Otherwise a name,
   * judged on what it resolves to when connecting.
   */
  literal: boolean;
}

const literal = (host: string, what: string): AddressForm => ({ host, what, literal: true });

export const ADDRESS_FORMS: readonly AddressForm[] = [
  literal('127.0.0.1', 'loopback'),
  literal('127.0.0.1.', 'loopback, trailing dot'),
  literal('127.1', 'loopback, short form'),
  literal('127.1.', 'loopback, short form with trailing dot'),
  literal('2130706433', 'loopback as one decimal number'),
  literal('0x7f000001', 'loopback as one hex number'),
  literal('0x7f.0.0.1', 'loopback with a hex part'),
  literal('0177.0.0.1', 'loopback with an octal part'),
  literal('017700000001', 'loopback as one octal number'),
  literal('127.0.0.%31', 'loopback, percent-encoded'),
  literal('0.0.0.0', 'unspecified (connects to this machine)'),
  literal('0', 'unspecified, short form'),
  literal('10.0.0.1', 'RFC 1918'),
  literal('192.168.0.1', 'RFC 1918'),
  literal('100.64.0.1', 'carrier-grade NAT'),
  literal('169.254.169.254', 'cloud metadata'),
  literal('169.254.1.1', 'IPv4 link-local'),
  literal('[::1]', 'IPv6 loopback'),
  literal('[::]', 'IPv6 unspecified'),
  literal('[::ffff:127.0.0.1]', 'IPv4-mapped loopback'),
  literal('[::ffff:7f00:1]', 'IPv4-mapped loopback, hex'),
  literal('[::ffff:169.254.169.254]', 'IPv4-mapped metadata'),
  literal('[::ffff:0:7f00:1]', 'IPv4-translated loopback'),
  literal('[::127.0.0.1]', 'IPv4-compatible loopback'),
  literal('[64:ff9b::7f00:1]', 'NAT64 of loopback'),
  literal('[64:ff9b::169.254.169.254]', 'NAT64 of the metadata address'),
  literal('[2002:7f00:1::]', '6to4 of loopback'),
  literal('[2002:a9fe:a9fe::]', '6to4 of the metadata address'),
  literal('[fe80::1]', 'IPv6 link-local'),
  literal('[fd00:ec2::254]', 'cloud metadata (IPv6)'),
  literal('[fc00::1]', 'IPv6 unique local'),
  { host: 'localhost', what: 'a name for loopback', literal: false },
  { host: 'LocalHost', what: 'a name for loopback, mixed case', literal: false },
];

/**
 * A TCP listener on this machine's loopback (IPv4 and, where there is one, IPv6) that counts
 * every connection and answers none: what a refused URL must never reach.
 */
export interface Listener {
  port: number;
  connections: () => number;
  close(): Promise<void>;
}

export async function startListener(): Promise<Listener> {
  let connections = 0;
  const count = (sock: import('node:net').Socket) => {
    connections++;
    sock.destroy();
  };
  const v4 = createServer(count);
  await new Promise<void>((r) => v4.listen(0, '127.0.0.1', r));
  const port = (v4.address() as { port: number }).port;
  const v6: Server | undefined = await new Promise((resolve) => {
    const s = createServer(count);
    s.once('error', () => resolve(undefined));
    s.listen(port, '::1', () => resolve(s));
  });
  return {
    port,
    connections: () => connections,
    close: async () => {
      await Promise.all([v4, v6].map((s) => s && new Promise((r) => s.close(r))));
    },
  };
}

import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { PG_HOST, PG_PORT } from '../../helpers/servers.js';

/**
 * A TCP proxy on loopback in front of a PostgreSQL server, to inject the faults a restart or
 * an operator produces at exact protocol moments: a start-up refused with FATAL 57P03, every
 * session cut, or a session cut when the client sends a given query.
 */
export interface PgProxy {
  port: number;
  /** The upstream URL with host and port replaced by the proxy's. */
  url(upstream: string): string;
  /** Answers the next `n` start-ups with FATAL 57P03 ("the database system is starting up") and closes them. */
  refuseStartups(n: number): void;
  /** Resets the next session whose client sends a message containing `text`, before it reaches the server. */
  cutOnQuery(text: string): Promise<void>;
  /** Cuts every open session at once, as a backend termination or a server crash would. */
  cutAll(): void;
  /** Sessions opened through the proxy so far (each start-up counts, refused ones too). */
  readonly sessions: number;
  /** Frontend messages of one type (a protocol letter: 'H' Flush, 'P' Parse…) clients have sent so far, every session together. */
  sent(type: string): number;
  close(): Promise<void>;
}

/** FATAL ErrorResponse as PostgreSQL sends it while it is still starting up. */
function startingUp(): Buffer {
  const field = (tag: string, value: string) => Buffer.concat([Buffer.from(tag), Buffer.from(`${value}\0`)]);
  const body = Buffer.concat([
    field('S', 'FATAL'),
    field('V', 'FATAL'),
    field('C', '57P03'),
    field('M', 'the database system is starting up'),
    Buffer.from([0]),
  ]);
  const head = Buffer.alloc(5);
  head.write('E', 0);
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

/**
 * Counts a session's frontend messages by type into `tally`: after the start-up message (a
 * length and no type), each is a type letter and a length that counts itself. A message may
 * span data events, so the framing carries over.
 */
function frontendCounter(tally: Map<string, number>): (d: Buffer) => void {
  let pending = Buffer.alloc(0);
  let started = false;
  return (d) => {
    pending = Buffer.concat([pending, d]);
    for (;;) {
      const head = started ? 5 : 4;
      if (pending.length < head) return;
      const length = started ? pending.readInt32BE(1) + 1 : pending.readInt32BE(0);
      if (pending.length < length) return;
      if (started) {
        const type = String.fromCharCode(pending[0]);
        tally.set(type, (tally.get(type) ?? 0) + 1);
      }
      started = true;
      pending = pending.subarray(length);
    }
  };
}

export async function startPgProxy(): Promise<PgProxy> {
  const open = new Set<Socket>();
  let refuse = 0;
  let sessions = 0;
  const cuts: { text: string; done: () => void }[] = [];
  const tally = new Map<string, number>();
  const server: Server = createServer((client) => {
    sessions++;
    open.add(client);
    client.on('error', () => {});
    client.on('close', () => open.delete(client));
    if (refuse > 0) {
      refuse--;
      client.once('data', () => client.end(startingUp()));
      return;
    }
    const upstream = createConnection({ host: PG_HOST, port: PG_PORT });
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    upstream.on('data', (d) => client.write(d));
    const count = frontendCounter(tally);
    client.on('data', (d: Buffer) => {
      count(d);
      const i = cuts.findIndex((c) => d.includes(c.text));
      if (i >= 0) {
        const [cut] = cuts.splice(i, 1);
        // A reset, as the client sees when a backend or its host dies mid-query.
        client.resetAndDestroy();
        upstream.destroy();
        cut.done();
        return;
      }
      upstream.write(d);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    url(upstream) {
      const u = new URL(upstream);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    refuseStartups(n) {
      refuse = n;
    },
    cutOnQuery(text) {
      return new Promise((done) => cuts.push({ text, done }));
    },
    cutAll() {
      for (const s of open) s.destroy();
    },
    get sessions() {
      return sessions;
    },
    sent(type) {
      return tally.get(type) ?? 0;
    },
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

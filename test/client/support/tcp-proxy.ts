import { createConnection, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy on loopback in front of the web process, so a test can cut a client's open
 * connections as a network failure would (both sockets destroyed, no clean end) and read
 * the request heads that came through.
 */
export interface TcpProxy {
  url: string;
  /** The first bytes each connection sent (the HTTP request head), in connection order. */
  readonly heads: string[];
  /** Destroys every open connection at once. */
  cutAll(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(upstream: string): Promise<TcpProxy> {
  const target = new URL(upstream);
  const open = new Set<Socket>();
  const heads: string[] = [];
  const server = createServer((client) => {
    const index = heads.push('') - 1;
    const server = createConnection({ host: target.hostname, port: Number(target.port) });
    for (const socket of [client, server]) {
      open.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => open.delete(socket));
    }
    client.once('data', (d: Buffer) => {
      heads[index] = d.toString('latin1');
    });
    client.pipe(server);
    server.pipe(client);
    client.on('close', () => server.destroy());
    server.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    heads,
    cutAll() {
      for (const socket of open) socket.destroy();
    },
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

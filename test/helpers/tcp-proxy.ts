import { createConnection, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy on loopback in front of a server (the web process, a broker), so a test can cut
 * a client's open connections as a network failure would (both sockets destroyed, no clean
 * end), lose what the server answers on them, and read the request heads that came through.
 */
export interface TcpProxy {
  port: number;
  url: string;
  /** The first bytes each connection sent (the HTTP request head), in connection order. */
  readonly heads: string[];
  /** Destroys every open connection at once. */
  cutAll(): void;
  /**
   * From now on, what the server sends on the connections open now is dropped, while what the
   * client sends still reaches it: the server acts on every request, the client hears no answer
   * (replies lost on the way back). Connections opened later are not affected.
   */
  muteReplies(): void;
  /**
   * What the server sends on the connections open now is held back (kept, not lost) until
   * `letRepliesThrough`: the server acts on every request, the client waits for its answers.
   */
  holdReplies(): void;
  /** Delivers what `holdReplies` kept, and everything after, on those connections. */
  letRepliesThrough(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(upstream: string): Promise<TcpProxy> {
  const target = new URL(upstream);
  const open = new Set<Socket>();
  /** Each open connection's upstream socket and client socket. */
  const pairs = new Map<Socket, Socket>();
  const heads: string[] = [];
  /** Connections whose replies are held, by upstream socket. */
  const held = new Map<Socket, Socket>();
  const proxy = createServer((client) => {
    const index = heads.push('') - 1;
    const server = createConnection({ host: target.hostname, port: Number(target.port) });
    for (const socket of [client, server]) {
      open.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => open.delete(socket));
    }
    pairs.set(server, client);
    client.once('data', (d: Buffer) => {
      heads[index] = d.toString('latin1');
    });
    client.pipe(server);
    server.pipe(client);
    client.on('close', () => server.destroy());
    server.on('close', () => {
      pairs.delete(server);
      client.destroy();
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const port = (proxy.address() as { port: number }).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    heads,
    cutAll() {
      for (const socket of open) socket.destroy();
    },
    muteReplies() {
      for (const [server, client] of pairs) {
        server.unpipe(client);
        // Read and dropped, so the server's writes never stall on a full socket.
        server.resume();
      }
    },
    holdReplies() {
      for (const [server, client] of pairs) {
        server.unpipe(client);
        held.set(server, client);
        server.pause();
      }
    },
    letRepliesThrough() {
      for (const [server, client] of held) if (pairs.has(server)) server.pipe(client);
      held.clear();
    },
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}

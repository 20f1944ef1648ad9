import { createServer, type Server } from 'node:http';

export interface Receipt {
  /** ms since epoch when the whole request had arrived. */
  at: number;
  /** The event's ledger creation time (ms since epoch), from the delivery body. */
  createdAt: number;
  /** When the delivery body was built (its `timestamp`): splits latency into before/after. */
  builtAt: number;
  deliveryId: string;
  eventId: string;
}

/**
 * Loopback webhook receivers answering 200 at once, recording each delivery's arrival time
 * and its event's creation time (so commit → receipt latency can be computed).
 */
export async function startReceivers(
  n: number,
): Promise<{ urls: string[]; receipts: Receipt[]; bareCount(): number; stop(): Promise<void> }> {
  const receipts: Receipt[] = [];
  let bare = 0;
  const servers: Server[] = [];
  for (let i = 0; i < n; i++) {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const at = Date.now();
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2' });
        res.end('ok');
        // Both kinds are parsed: the floor does the same receiver work as the real deliveries.
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          id: string;
          event_id: string;
          created_at: string;
          timestamp: string;
        };
        if (req.url === '/bare') {
          bare++;
          return;
        }
        receipts.push({
          at,
          createdAt: Date.parse(body.created_at),
          builtAt: Date.parse(body.timestamp),
          deliveryId: body.id,
          eventId: body.event_id,
        });
      });
    });
    server.keepAliveTimeout = 65_000;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    servers.push(server);
  }
  return {
    urls: servers.map((s) => `http://127.0.0.1:${(s.address() as { port: number }).port}/hook`),
    receipts,
    bareCount: () => bare,
    async stop() {
      for (const s of servers) s.closeAllConnections();
      await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    },
  };
}

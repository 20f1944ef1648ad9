import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  /** The raw body text, exactly as sent. */
  body: string;
  json: any;
  at: number;
}

export interface Answer {
  status: number;
  body?: string;
  headers?: Record<string, string>;
  /** Milliseconds to wait before answering. */
  delayMs?: number;
}

export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** How the next requests are answered; the last answer repeats. Default 200. */
  answer(...answers: (Answer | ((r: Received) => Answer))[]): void;
  /** Resolves once `n` requests have arrived (matching `filter`), or rejects at the deadline. */
  waitFor(n: number, filter?: (r: Received) => boolean, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

/** A real HTTP receiver on 127.0.0.1 that records every delivery it gets. */
export async function startReceiver(): Promise<Receiver> {
  const received: Received[] = [];
  let answers: (Answer | ((r: Received) => Answer))[] = [{ status: 200, body: 'ok' }];
  const waiters = new Set<() => void>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch {
        json = undefined;
      }
      const r: Received = { path: req.url ?? '/', headers: req.headers, body, json, at: Date.now() };
      received.push(r);
      const next = answers.length > 1 ? answers.shift()! : answers[0];
      const a = typeof next === 'function' ? next(r) : next;
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(a.status, { 'content-type': 'text/plain', ...(a.headers ?? {}) });
        res.end(a.body ?? '');
      };
      if (a.delayMs) setTimeout(send, a.delayMs);
      else send();
      for (const w of waiters) w();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received,
    answer(...a) {
      answers = a;
    },
    waitFor(n, filter = () => true, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const got = received.filter(filter);
          if (got.length >= n) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(got);
            return true;
          }
          return false;
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`receiver got ${received.filter(filter).length} of ${n} expected requests in ${timeoutMs} ms`));
        }, timeoutMs);
        if (!check()) waiters.add(check);
      });
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Polls `fn` until it returns a truthy value or the deadline passes. */
export async function eventually<T>(fn: () => Promise<T | undefined | false | null>, timeoutMs = 10_000, everyMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

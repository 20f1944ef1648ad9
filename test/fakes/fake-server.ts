import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A file part of a multipart request, as the fake received it. */
export interface ReceivedFile {
  field: string;
  filename: string;
  type: string;
  data: Buffer;
}

/** One request a fake received, with its body decoded the way its content type says. */
export interface RecordedRequest {
  method: string;
  /** Path without the query string. */
  path: string;
  query: Record<string, string>;
  /** Lower-cased names. */
  headers: Record<string, string>;
  rawBody: Buffer;
  /** application/json bodies. */
  json?: any;
  /** application/x-www-form-urlencoded bodies and the text fields of multipart bodies. */
  form?: Record<string, string>;
  /** File parts of multipart bodies. */
  files?: ReceivedFile[];
  /** Arrival time (ms, performance clock), for rate checks. */
  at: number;
}

export interface FakeReply {
  status: number;
  /** Objects are sent as JSON; strings and Buffers as they are. */
  body?: unknown;
  headers?: Record<string, string>;
  /** Answer after this long (ms): to exercise timeouts. */
  delayMs?: number;
  /** Drop the connection without answering: a network failure. */
  destroy?: boolean;
}

export type FakeHandler = (req: RecordedRequest) => FakeReply | Promise<FakeReply>;
type Scripted = { remaining: number; match: (r: RecordedRequest) => boolean; reply: FakeHandler };

/**
 * A local HTTP server standing in for a platform, on 127.0.0.1 and a free port. It records
 * every request; `script` overrides the next N answers (500s, 429s, 403s…) before the
 * platform behaviour (`handler`) applies again.
 */
export class FakeServer {
  readonly requests: RecordedRequest[] = [];
  url = '';
  private readonly scripts: Scripted[] = [];
  private readonly listeners = new Set<() => void>();
  private server?: Server;

  /** `keepRequests: false` for long benchmarks: requests are handled but not kept. */
  constructor(
    private readonly handler: FakeHandler,
    private readonly options: { keepRequests?: boolean } = {},
  ) {}

  static async start(handler: FakeHandler, options: { keepRequests?: boolean } = {}): Promise<FakeServer> {
    const fake = new FakeServer(handler, options);
    await fake.listen();
    return fake;
  }

  async listen(): Promise<void> {
    this.server = createServer((req, res) => void this.serve(req, res));
    this.server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /**
   * The next `n` requests that `match` get `reply` instead of the platform behaviour.
   * Scripts apply in the order given.
   */
  script(n: number, reply: FakeReply | FakeHandler, match: (r: RecordedRequest) => boolean = () => true): this {
    this.scripts.push({ remaining: n, match, reply: typeof reply === 'function' ? reply : () => reply });
    return this;
  }

  /** Requests matching a predicate (all by default). */
  received(match: (r: RecordedRequest) => boolean = () => true): RecordedRequest[] {
    return this.requests.filter(match);
  }

  /** Resolves once `n` requests matching `match` have arrived; rejects after `timeoutMs`. */
  waitFor(n: number, match: (r: RecordedRequest) => boolean = () => true, timeoutMs = 15_000): Promise<RecordedRequest[]> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const got = this.received(match);
        if (got.length >= n) {
          this.listeners.delete(check);
          clearTimeout(timer);
          resolve(got);
          return true;
        }
        return false;
      };
      const timer = setTimeout(() => {
        this.listeners.delete(check);
        reject(new Error(`fake at ${this.url}: waited ${timeoutMs} ms for ${n} requests, got ${this.received(match).length}`));
      }, timeoutMs);
      if (!check()) this.listeners.add(check);
    });
  }

  /** Forgets recorded requests and pending scripts. */
  reset(): void {
    this.requests.length = 0;
    this.scripts.length = 0;
  }

  async close(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const rawBody = Buffer.concat(chunks);
    const url = new URL(req.url ?? '/', 'http://fake');
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : String(v)]));
    const recorded: RecordedRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers,
      rawBody,
      at: performance.now(),
      ...(await decodeBody(headers['content-type'] ?? '', rawBody)),
    };
    if (this.options.keepRequests !== false) this.requests.push(recorded);
    for (const l of [...this.listeners]) l();

    let reply: FakeReply;
    try {
      const script = this.scripts.find((s) => s.remaining > 0 && s.match(recorded));
      if (script) {
        script.remaining -= 1;
        if (script.remaining === 0) this.scripts.splice(this.scripts.indexOf(script), 1);
        reply = await script.reply(recorded);
      } else {
        reply = await this.handler(recorded);
      }
    } catch (err) {
      reply = { status: 500, body: { error: `fake handler failed: ${(err as Error).message}` } };
    }
    if (reply.delayMs) await new Promise((r) => setTimeout(r, reply.delayMs));
    if (reply.destroy) {
      req.socket.destroy();
      return;
    }
    const isJson = reply.body !== undefined && typeof reply.body !== 'string' && !Buffer.isBuffer(reply.body);
    const body = reply.body === undefined ? '' : isJson ? JSON.stringify(reply.body) : (reply.body as string | Buffer);
    res.writeHead(reply.status, { ...(isJson ? { 'content-type': 'application/json' } : {}), ...reply.headers });
    res.end(body);
  }
}

async function decodeBody(contentType: string, raw: Buffer): Promise<Pick<RecordedRequest, 'json' | 'form' | 'files'>> {
  try {
    if (contentType.startsWith('application/json')) return { json: JSON.parse(raw.toString('utf8')) };
    if (contentType.startsWith('application/x-www-form-urlencoded'))
      return { form: Object.fromEntries(new URLSearchParams(raw.toString('utf8'))) };
    if (contentType.startsWith('multipart/form-data')) {
      const data = await new Request('http://fake/', {
        method: 'POST',
        headers: { 'content-type': contentType },
        body: new Uint8Array(raw),
      }).formData();
      const form: Record<string, string> = {};
      const files: ReceivedFile[] = [];
      for (const [field, value] of data.entries()) {
        if (typeof value === 'string') form[field] = value;
        else files.push({ field, filename: value.name, type: value.type, data: Buffer.from(await value.arrayBuffer()) });
      }
      return { form, files };
    }
  } catch {
    // A body that does not decode stays raw; the platform handler answers it as the platform would.
  }
  return {};
}

/**
 * GCRA, the fakes' model of a documented limit: `rate` per `perMs`, with `burst` requests of
 * tolerance beyond it. `take` answers 0 when the request conforms (and charges it), else the
 * ms until it would.
 */
export class RateLimit {
  private readonly tat = new Map<string, number>();
  private readonly interval: number;
  private readonly tolerance: number;

  constructor(rate: number, perMs: number, burst = 0) {
    this.interval = perMs / rate;
    this.tolerance = this.interval * burst;
  }

  take(key: string, now = performance.now()): number {
    const tat = Math.max(this.tat.get(key) ?? now, now);
    const allowedAt = tat - this.tolerance;
    if (allowedAt > now) return allowedAt - now;
    this.tat.set(key, tat + this.interval);
    return 0;
  }
}

/**
 * What every platform's fake shares: its server, the sends it accepted, reset and close. A
 * fake implements `handle` (the platform's documented behaviour) and starts with `listening`.
 */
export abstract class PlatformFake {
  readonly server: FakeServer;
  /** Sends the fake accepted, in arrival order. */
  readonly accepted: RecordedRequest[] = [];

  protected constructor(serverOptions: { keepRequests?: boolean } = {}) {
    this.server = new FakeServer((r) => this.handle(r), serverOptions);
  }

  protected abstract handle(r: RecordedRequest): FakeReply | Promise<FakeReply>;

  protected static async listening<F extends PlatformFake>(fake: F): Promise<F> {
    await fake.server.listen();
    return fake;
  }

  get url(): string {
    return this.server.url;
  }

  /** Forgets recorded requests, accepted sends and pending scripts (behaviour settings stay). */
  reset(): void {
    this.server.reset();
    this.accepted.length = 0;
  }

  close(): Promise<void> {
    return this.server.close();
  }
}

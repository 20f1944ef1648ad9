import { Pool, type Dispatcher } from 'undici';
import { guardedLookup, judgeUrl, TargetRefusedError, type OutboundPolicy } from '../net/outbound-policy.js';

/** Response bodies (and request bodies in logs) are kept up to this many bytes. */
const LOG_BODY_LIMIT = 64 * 1024;

/** Bodies in logs are cut to 64 KB (bytes), without splitting a character. */
export function capBody(s: string): string {
  const buf = Buffer.from(s, 'utf8');
  return buf.length <= LOG_BODY_LIMIT
    ? s
    : buf
        .subarray(0, LOG_BODY_LIMIT)
        .toString('utf8')
        .replace(/\uFFFD$/, '');
}

type DispatchController = Dispatcher.DispatchController;

export interface PostResult {
  /** Undefined when no response arrived (refused, connection error, timeout). */
  statusCode?: number;
  headers: Record<string, string | string[] | undefined>;
  responseBody: string;
  durationMs: number;
  /** Why the attempt failed without a status, or why a status is not success. */
  error?: string;
}

export interface WebhookHttpClient {
  /** POSTs `body` to `url`; a 2xx counts only when the whole answer arrived within the timeout. */
  post(url: string, body: string, headers: Record<string, string>): Promise<PostResult>;
  close(): Promise<void>;
}

export interface HttpClientOptions {
  policy: OutboundPolicy;
  /** Whole-attempt deadline (connect, headers and body), in ms. */
  timeoutMs: number;
  /** Keep-alive sockets per receiver origin. @default 32 */
  connectionsPerOrigin?: number;
}

/** Where a target URL's requests go, worked out once per URL (or why they may not). */
type Target = { pool: Pool; path: string } | { refused: string };

/** Parsed targets kept; past this many (a huge tenant count) the map starts over. */
const MAX_TARGETS = 10_000;

/**
 * One keep-alive undici Pool per receiver origin, so a busy receiver reuses warm sockets
 * instead of paying a handshake per delivery. Redirects are never followed (a 3xx is a
 * failure): following one would let a receiver point us at an address the policy refuses.
 *
 * Requests go through the pool's dispatch interface rather than `request()`: no response
 * stream, no AbortSignal per attempt (one timer decides the deadline), and the answer is
 * collected straight from the parser's callbacks. Each target URL is parsed and judged once.
 */
export function createWebhookHttpClient(options: HttpClientOptions): WebhookHttpClient {
  const { timeoutMs } = options;
  const pools = new Map<string, Pool>();
  const targets = new Map<string, Target>();
  const poolFor = (url: URL) => {
    let pool = pools.get(url.origin);
    if (!pool) {
      pool = new Pool(url.origin, {
        connections: options.connectionsPerOrigin ?? 32,
        keepAliveTimeout: 30_000,
        // undici's own header/body timers are coarse (±0.5 s) and could fire before the
        // deadline; the precise per-attempt timer (Attempt) decides, these only backstop it.
        headersTimeout: timeoutMs + 1000,
        bodyTimeout: timeoutMs + 1000,
        connect: options.policy === 'public-https' ? { lookup: guardedLookup as never, timeout: timeoutMs } : { timeout: timeoutMs },
      });
      pools.set(url.origin, pool);
    }
    return pool;
  };
  const targetOf = (rawUrl: string): Target => {
    let target = targets.get(rawUrl);
    if (target) return target;
    target = judge(rawUrl);
    if (targets.size >= MAX_TARGETS) targets.clear();
    targets.set(rawUrl, target);
    return target;
  };
  // Address literals never reach the socket's lookup, so judgeUrl judges them here; names are judged by guardedLookup.
  const judge = (rawUrl: string): Target => {
    const judged = judgeUrl(rawUrl, 'http', options.policy);
    if (!judged.ok) return { refused: judged.reason === 'not a URL' ? 'target_url is not a URL' : `refused: ${judged.reason}` };
    return { pool: poolFor(judged.url), path: `${judged.url.pathname}${judged.url.search}` };
  };

  return {
    post(rawUrl, body, headers) {
      const started = performance.now();
      const done = (r: Omit<PostResult, 'durationMs'>): PostResult => ({ ...r, durationMs: Math.round(performance.now() - started) });
      const target = targetOf(rawUrl);
      if ('refused' in target) return Promise.resolve(done({ headers: {}, responseBody: '', error: target.refused }));
      return new Promise<PostResult>((resolve) => {
        const attempt = new Attempt(timeoutMs, (r) => resolve(done(r)));
        target.pool.dispatch({ method: 'POST', path: target.path, headers: sentHeaders(headers), body }, attempt);
      });
    },
    async close() {
      await Promise.allSettled([...pools.values()].map((p) => p.close()));
      pools.clear();
      targets.clear();
    },
  };
}

const BASE_HEADERS = { 'content-type': 'application/json', 'user-agent': 'messaging-gateway-webhooks/1' };

/** The headers a POST sends: the fixed ones and the delivery's own (signature, ids). The attempt log shows them. */
export const sentHeaders = (headers: Record<string, string>): Record<string, string> => ({ ...BASE_HEADERS, ...headers });

/**
 * One attempt's dispatch handler: collects the answer from the parser's callbacks and settles
 * once — with the answer, the error, or the deadline, whichever comes first. (A class, so the
 * hot path allocates one object per attempt rather than a set of closures.)
 */
class Attempt implements Dispatcher.DispatchHandler {
  private settled = false;
  private controller: DispatchController | undefined;
  private statusCode = 0;
  private headers: PostResult['headers'] = {};
  private readonly kept: Buffer[] = [];
  private size = 0;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly timeoutMs: number,
    private readonly resolve: (r: Omit<PostResult, 'durationMs'>) => void,
  ) {
    this.timer = setTimeout(() => this.onDeadline(), timeoutMs);
  }

  private settle(r: Omit<PostResult, 'durationMs'>): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    this.resolve(r);
  }

  private timedOut(): string {
    return `no complete answer within ${this.timeoutMs} ms`;
  }

  private onDeadline(): void {
    this.settle({ headers: {}, responseBody: '', error: this.timedOut() });
    this.controller?.abort(new Error(this.timedOut()));
  }

  onRequestStart(controller: DispatchController): void {
    this.controller = controller;
    // Timed out while waiting for a socket: never sent.
    if (this.settled) controller.abort(new Error(this.timedOut()));
  }

  onResponseStart(_c: DispatchController, statusCode: number, headers: PostResult['headers']): void {
    this.statusCode = statusCode;
    this.headers = headers;
  }

  // The whole body is read (so the socket can be reused) but only the first LOG_BODY_LIMIT bytes kept.
  onResponseData(_c: DispatchController, chunk: Buffer): void {
    if (this.size < LOG_BODY_LIMIT)
      this.kept.push(this.size + chunk.length <= LOG_BODY_LIMIT ? chunk : chunk.subarray(0, LOG_BODY_LIMIT - this.size));
    this.size += chunk.length;
  }

  onResponseEnd(): void {
    const { statusCode, kept } = this;
    const ok = statusCode >= 200 && statusCode < 300;
    const responseBody = kept.length === 1 ? kept[0].toString('utf8') : Buffer.concat(kept).toString('utf8');
    this.settle({ statusCode, headers: this.headers, responseBody, ...(ok ? {} : { error: `receiver answered ${statusCode}` }) });
  }

  onResponseError(_c: DispatchController, err: Error): void {
    this.settle({ headers: {}, responseBody: '', error: describe(err, this.timeoutMs) });
  }
}

function describe(err: unknown, timeoutMs: number): string {
  let e = err as (Error & { code?: string; cause?: unknown }) | undefined;
  // undici wraps the socket's error; the lookup's refusal is the one worth reporting.
  for (let i = 0; e && i < 3; i++, e = e.cause as typeof e) {
    if (e instanceof TargetRefusedError) return e.message;
  }
  const top = err as Error & { code?: string };
  if (top?.code === 'UND_ERR_HEADERS_TIMEOUT' || top?.code === 'UND_ERR_BODY_TIMEOUT') return `no complete answer within ${timeoutMs} ms`;
  return `${top?.code ? `${top.code}: ` : ''}${top?.message ?? String(err)}`;
}

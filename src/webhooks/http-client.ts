import { isIP } from 'node:net';
import { Pool, type Dispatcher } from 'undici';
import { guardedLookup, isPublicAddress, TargetRefusedError, type TargetPolicy } from './target-policy.js';

/** Response bodies (and request bodies in logs) are kept up to this many bytes. */
export const LOG_BODY_LIMIT = 64 * 1024;

/** Bodies in logs are cut to 64 KB (bytes), without splitting a character. */
export function capBody(s: string): string {
  const buf = Buffer.from(s, 'utf8');
  return buf.length <= LOG_BODY_LIMIT ? s : buf.subarray(0, LOG_BODY_LIMIT).toString('utf8').replace(/\uFFFD$/, '');
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
  policy: TargetPolicy;
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
        // deadline; the precise timer in post() decides, these only backstop it.
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
  const judge = (rawUrl: string): Target => {
    let url: URL;
    try {
      url = new URL(rawUrl);
    } catch {
      return { refused: 'target_url is not a URL' };
    }
    if (options.policy === 'public-https') {
      if (url.protocol !== 'https:') return { refused: 'refused: target must use https' };
      // Address literals never reach the socket's lookup, so they are judged here.
      const host = url.hostname.replace(/^\[|\]$/g, '');
      if (isIP(host) && !isPublicAddress(host)) return { refused: `refused: ${host} is not a public address` };
    }
    return { pool: poolFor(url), path: `${url.pathname}${url.search}` };
  };

  return {
    post(rawUrl, body, headers) {
      const started = performance.now();
      const done = (r: Omit<PostResult, 'durationMs'>): PostResult => ({ ...r, durationMs: Math.round(performance.now() - started) });
      const target = targetOf(rawUrl);
      if ('refused' in target) return Promise.resolve(done({ headers: {}, responseBody: '', error: target.refused }));
      return new Promise<PostResult>((resolve) => {
        let settled = false;
        let controller: DispatchController | undefined;
        let statusCode = 0;
        let resHeaders: PostResult['headers'] = {};
        const kept: Buffer[] = [];
        let size = 0;
        const settle = (r: Omit<PostResult, 'durationMs'>) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve(done(r));
        };
        const timedOut = `no complete answer within ${timeoutMs} ms`;
        const timer = setTimeout(() => {
          settle({ headers: {}, responseBody: '', error: timedOut });
          controller?.abort(new Error(timedOut));
        }, timeoutMs);
        target.pool.dispatch(
          { method: 'POST', path: target.path, headers: { 'content-type': 'application/json', 'user-agent': 'messaging-gateway-webhooks/1', ...headers }, body },
          {
            onRequestStart(c) {
              controller = c;
              // Timed out while waiting for a socket: never sent.
              if (settled) c.abort(new Error(timedOut));
            },
            onResponseStart(_c, code, h) {
              statusCode = code;
              resHeaders = h;
            },
            // The whole body is read (so the socket can be reused) but only the first LOG_BODY_LIMIT bytes kept.
            onResponseData(_c, chunk) {
              if (size < LOG_BODY_LIMIT) kept.push(size + chunk.length <= LOG_BODY_LIMIT ? chunk : chunk.subarray(0, LOG_BODY_LIMIT - size));
              size += chunk.length;
            },
            onResponseEnd() {
              const ok = statusCode >= 200 && statusCode < 300;
              const responseBody = kept.length === 1 ? kept[0].toString('utf8') : Buffer.concat(kept).toString('utf8');
              settle({ statusCode, headers: resHeaders, responseBody, ...(ok ? {} : { error: `receiver answered ${statusCode}` }) });
            },
            onResponseError(_c, err) {
              settle({ headers: {}, responseBody: '', error: describe(err, timeoutMs) });
            },
          },
        );
      });
    },
    async close() {
      await Promise.allSettled([...pools.values()].map((p) => p.close()));
      pools.clear();
      targets.clear();
    },
  };
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

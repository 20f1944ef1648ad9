import { isIP } from 'node:net';
import { Pool } from 'undici';
import { guardedLookup, isPublicAddress, TargetRefusedError, type TargetPolicy } from './target-policy.js';

/** Response bodies (and request bodies in logs) are kept up to this many bytes. */
export const LOG_BODY_LIMIT = 64 * 1024;

/** Bodies in logs are cut to 64 KB (bytes), without splitting a character. */
export function capBody(s: string): string {
  const buf = Buffer.from(s, 'utf8');
  return buf.length <= LOG_BODY_LIMIT ? s : buf.subarray(0, LOG_BODY_LIMIT).toString('utf8').replace(/\uFFFD$/, '');
}

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

/**
 * One keep-alive undici Pool per receiver origin, so a busy receiver reuses warm sockets
 * instead of paying a handshake per delivery. Redirects are never followed (a 3xx is a
 * failure): following one would let a receiver point us at an address the policy refuses.
 */
export function createWebhookHttpClient(options: HttpClientOptions): WebhookHttpClient {
  const pools = new Map<string, Pool>();
  const poolFor = (url: URL) => {
    let pool = pools.get(url.origin);
    if (!pool) {
      pool = new Pool(url.origin, {
        connections: options.connectionsPerOrigin ?? 32,
        keepAliveTimeout: 30_000,
        // undici's own header/body timers are coarse (±0.5 s) and could fire before the
        // deadline; the precise AbortSignal below decides, these only backstop it.
        headersTimeout: options.timeoutMs + 1000,
        bodyTimeout: options.timeoutMs + 1000,
        connect: options.policy === 'public-https' ? { lookup: guardedLookup as never, timeout: options.timeoutMs } : { timeout: options.timeoutMs },
      });
      pools.set(url.origin, pool);
    }
    return pool;
  };

  return {
    async post(rawUrl, body, headers) {
      const started = performance.now();
      const done = (r: Omit<PostResult, 'durationMs'>): PostResult => ({ ...r, durationMs: Math.round(performance.now() - started) });
      let url: URL;
      try {
        url = new URL(rawUrl);
      } catch {
        return done({ headers: {}, responseBody: '', error: 'target_url is not a URL' });
      }
      if (options.policy === 'public-https') {
        if (url.protocol !== 'https:') return done({ headers: {}, responseBody: '', error: 'refused: target must use https' });
        // Address literals never reach the socket's lookup, so they are judged here.
        const host = url.hostname.replace(/^\[|\]$/g, '');
        if (isIP(host) && !isPublicAddress(host)) return done({ headers: {}, responseBody: '', error: `refused: ${host} is not a public address` });
      }
      const signal = AbortSignal.timeout(options.timeoutMs);
      try {
        const res = await poolFor(url).request({
          method: 'POST',
          path: `${url.pathname}${url.search}`,
          headers: { 'content-type': 'application/json', 'user-agent': 'messaging-gateway-webhooks/1', ...headers },
          body,
          signal,
        });
        const responseBody = await readCapped(res.body, LOG_BODY_LIMIT);
        const statusCode = res.statusCode;
        const ok = statusCode >= 200 && statusCode < 300;
        return done({ statusCode, headers: res.headers, responseBody, ...(ok ? {} : { error: `receiver answered ${statusCode}` }) });
      } catch (err) {
        return done({ headers: {}, responseBody: '', error: describe(err, signal.aborted, options.timeoutMs) });
      }
    },
    async close() {
      await Promise.allSettled([...pools.values()].map((p) => p.close()));
      pools.clear();
    },
  };
}

/** Reads the whole body (so the socket can be reused) but keeps only the first `limit` bytes. */
async function readCapped(body: AsyncIterable<Buffer>, limit: number): Promise<string> {
  const kept: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    if (size < limit) kept.push(chunk.subarray(0, limit - size));
    size += chunk.length;
  }
  return Buffer.concat(kept).toString('utf8');
}

function describe(err: unknown, timedOut: boolean, timeoutMs: number): string {
  if (timedOut) return `no complete answer within ${timeoutMs} ms`;
  let e = err as (Error & { code?: string; cause?: unknown }) | undefined;
  // undici wraps the socket's error; the lookup's refusal is the one worth reporting.
  for (let i = 0; e && i < 3; i++, e = e.cause as typeof e) {
    if (e instanceof TargetRefusedError) return e.message;
  }
  const top = err as Error & { code?: string };
  if (top?.code === 'UND_ERR_HEADERS_TIMEOUT' || top?.code === 'UND_ERR_BODY_TIMEOUT') return `no complete answer within ${timeoutMs} ms`;
  return `${top?.code ? `${top.code}: ` : ''}${top?.message ?? String(err)}`;
}

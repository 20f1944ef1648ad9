import { EventSourceParserStream } from 'eventsource-parser/stream';
import { GatewayError } from './errors.js';

/** An event as the stream sends it (the GraphQL `events` node shape, camelCase). */
export interface StreamEvent {
  id: string;
  appId: string;
  eventType: string;
  /** The tags it was written with. */
  channels: string[];
  payload: Record<string, unknown>;
  edges: {
    edgeType: string;
    targetNodeType: 'PLATFORM_USER' | 'FILE';
    targetNodeId: string;
    targetPlatformUser: { id: string; externalId: string | null; name: string | null } | null;
  }[];
  attachments: unknown[];
  createdAt: string;
  originEventId: string | null;
  conversationId: string | null;
  platformConnectionId: string | null;
  validationErrors?: unknown[] | null;
  /** The event's cursor (the frame's `id:`): what `Last-Event-ID` resumes after. */
  cursor: string;
}

export interface StreamOptions {
  /** Only events whose type matches one of these patterns (`message.*`, `order.created`). */
  eventTypes?: string[];
  /** Only events involving this user. */
  userId?: string;
  /** Only events in this conversation. */
  conversationId?: string;
  /** Only events carrying one of these channels. */
  channels?: string[];
  /**
   * Start after this cursor (a StreamEvent's `cursor`, or a REST event's): every matching event
   * after it first, then live ones. Without it the stream starts live with a small backfill.
   */
  lastEventId?: string;
  /** Ends the iteration (the loop sees the iterator finish). */
  signal?: AbortSignal;
  /** Wait before reconnecting (ms), doubled after each failed attempt; a `retry:` field from the service replaces it. @default 1000 */
  reconnectDelayMs?: number;
  /** Cap of the wait between attempts (ms), a 429's or 503's `Retry-After` included. @default 30000 */
  maxReconnectDelayMs?: number;
  /** Told of every connection attempt with the cursor it resumes after (logging, tests). */
  onConnect?: (lastEventId: string | undefined) => void;
}

/** What the stream needs of the client. */
export interface StreamConnection {
  baseUrl: string;
  headers: Record<string, string>;
  fetch: typeof globalThis.fetch;
}

/**
 * GET /events/stream as an async iterator. A connection that ends or breaks — the service's
 * 60-minute limit, a deploy, a cut network — is reopened with `Last-Event-ID` set to the last
 * cursor received, and the service sends every matching event after it first (docs/guide.md, Streams), so
 * the loop sees each event once, in order, across reconnects. Authentication and validation
 * refusals, and a key revoked mid-stream, end the iteration with a GatewayError; a 429 (too
 * many open streams), 5xx or network failure is retried with backoff.
 */
export async function* streamEvents(
  connection: StreamConnection,
  options: StreamOptions = {},
): AsyncGenerator<StreamEvent, void, undefined> {
  const query = new URLSearchParams();
  if (options.eventTypes?.length) query.set('eventTypes', options.eventTypes.join(','));
  if (options.userId) query.set('userId', options.userId);
  if (options.conversationId) query.set('conversationId', options.conversationId);
  if (options.channels?.length) query.set('channels', options.channels.join(','));
  const url = `${connection.baseUrl}/events/stream${query.size ? `?${query}` : ''}`;
  const abort = new AbortController();
  const stop = () => abort.abort();
  options.signal?.addEventListener('abort', stop, { once: true });
  if (options.signal?.aborted) stop();

  let lastEventId = options.lastEventId;
  let baseDelay = options.reconnectDelayMs ?? 1000;
  const maxDelay = options.maxReconnectDelayMs ?? 30_000;
  let failures = 0;
  try {
    while (!abort.signal.aborted) {
      options.onConnect?.(lastEventId);
      let reader: ReadableStreamDefaultReader<{ event?: string; id?: string; data: string }> | undefined;
      try {
        const response = await connection.fetch(url, {
          headers: { ...connection.headers, Accept: 'text/event-stream', ...(lastEventId ? { 'Last-Event-ID': lastEventId } : {}) },
          signal: abort.signal,
        });
        if (!response.ok || !response.body) {
          const body = await response.text().then(parseJson, () => undefined);
          const error = new GatewayError(response.status, body, response.headers);
          if (response.status !== 429 && response.status < 500) throw error;
          failures++;
          await sleep(retryDelay(error.retryAfter, baseDelay, failures, maxDelay), abort.signal);
          continue;
        }
        failures = 0;
        reader = response.body
          .pipeThrough(new TextDecoderStream())
          .pipeThrough(
            new EventSourceParserStream({
              onRetry: (ms) => {
                baseDelay = ms;
              },
            }),
          )
          .getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          // A key revoked mid-stream: the last frame says why; reconnecting would only be refused.
          if (value.event === 'error') throw new GatewayError(401, parseJson(value.data));
          if (value.event && value.event !== 'message') continue;
          const event = JSON.parse(value.data) as StreamEvent;
          if (value.id) lastEventId = value.id;
          yield { ...event, cursor: value.id ?? event.cursor };
        }
      } catch (err) {
        if (err instanceof GatewayError) throw err;
        if (abort.signal.aborted) return;
        // A cut connection: reconnect below from the last cursor.
        failures++;
      } finally {
        reader?.cancel().catch(() => undefined);
      }
      await sleep(retryDelay(undefined, baseDelay, failures, maxDelay), abort.signal);
    }
  } finally {
    options.signal?.removeEventListener('abort', stop);
    abort.abort();
  }
}

function retryDelay(retryAfterSeconds: number | undefined, base: number, failures: number, max: number): number {
  if (retryAfterSeconds !== undefined) return Math.min(max, retryAfterSeconds * 1000);
  return Math.min(max, base * 2 ** Math.max(0, failures - 1));
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

import { apiFetch } from './openapi-contract.js';

/** One parsed Server-Sent Events frame (or a comment line such as `: keep-alive`). */
export interface SseFrame {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

/**
 * A minimal SSE client over fetch for tests: frames are parsed as they arrive and handed
 * out in order by `next()`; comments are kept apart.
 */
export interface SseClient {
  status: number;
  headers: Headers;
  /** Body text when the answer was not a stream (errors). */
  text?: string;
  /** Next event frame (id/data/event), or undefined once the stream has ended. Rejects after `timeoutMs`. */
  next(timeoutMs?: number): Promise<SseFrame | undefined>;
  /** Frames received so far but not yet taken with next(). */
  pending(): number;
  comments: string[];
  /** Resolves when the server ends the stream (or the connection drops). */
  ended: Promise<'end' | 'error'>;
  close(): void;
}

export async function openSse(
  url: string,
  init: { headers?: Record<string, string>; method?: string; body?: string } = {},
): Promise<SseClient> {
  const abort = new AbortController();
  const r = await apiFetch(url, {
    method: init.method ?? 'GET',
    headers: { Accept: 'text/event-stream', ...(init.headers ?? {}) },
    body: init.body,
    signal: abort.signal,
  });
  const frames: SseFrame[] = [];
  const comments: string[] = [];
  let waiter: (() => void) | undefined;
  let finished = false;
  const notify = () => {
    const w = waiter;
    waiter = undefined;
    w?.();
  };
  if (!(r.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    const text = await r.text();
    return {
      status: r.status,
      headers: r.headers,
      text,
      next: async () => undefined,
      pending: () => 0,
      comments,
      ended: Promise.resolve('end'),
      close: () => abort.abort(),
    };
  }
  const ended = (async (): Promise<'end' | 'error'> => {
    const decoder = new TextDecoder();
    let buf = '';
    try {
      for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
        buf += decoder.decode(chunk, { stream: true });
        let idx: number;
        while ((idx = buf.indexOf('\n\n')) !== -1) {
          const block = buf.slice(0, idx);
          buf = buf.slice(idx + 2);
          const frame: SseFrame = {};
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else if (line.startsWith('id:')) frame.id = line.slice(3).trimStart();
            else if (line.startsWith('event:')) frame.event = line.slice(6).trimStart();
            else if (line.startsWith('data:')) frame.data = (frame.data === undefined ? '' : `${frame.data}\n`) + line.slice(5).trimStart();
          }
          if (frame.id !== undefined || frame.data !== undefined || frame.event !== undefined) frames.push(frame);
          notify();
        }
      }
      return 'end';
    } catch {
      return 'error';
    } finally {
      finished = true;
      notify();
    }
  })();
  return {
    status: r.status,
    headers: r.headers,
    comments,
    ended,
    pending: () => frames.length,
    async next(timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const f = frames.shift();
        if (f) return f;
        if (finished) return undefined;
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no SSE frame within ${timeoutMs} ms`);
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, left);
          waiter = () => {
            clearTimeout(t);
            resolve();
          };
        });
      }
    },
    close: () => abort.abort(),
  };
}

/** Takes `n` event frames, failing if they do not all arrive within `timeoutMs`. */
export async function take(client: SseClient, n: number, timeoutMs = 10_000): Promise<SseFrame[]> {
  const out: SseFrame[] = [];
  const deadline = Date.now() + timeoutMs;
  while (out.length < n) {
    const f = await client.next(Math.max(1, deadline - Date.now()));
    if (!f) throw new Error(`stream ended after ${out.length} of ${n} frames`);
    out.push(f);
  }
  return out;
}

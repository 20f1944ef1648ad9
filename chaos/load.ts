/**
 * Steady load for the chaos harness, and what each client was told: the accounting that the
 * reconciliation compares with the ledger, the streams and the receivers.
 */
import type { AppCredentials } from './cluster.js';

/** A request that has not answered in this long counts as a hang (the service promises bounded answers). */
const HANG_MS = 30_000;

export interface Tally {
  /** Responses by status (`503`) or failure (`network`, `hang`). */
  statuses: Record<string, number>;
  count(status: string): void;
}

function tally(): Tally {
  const statuses: Record<string, number> = {};
  return { statuses, count: (s) => void (statuses[s] = (statuses[s] ?? 0) + 1) };
}

export interface HttpResult {
  status: string;
  json?: any;
}

/** One request; never throws: a refused connection or a hang is a status like any other. */
export async function call(
  url: string,
  init: { method: string; headers?: Record<string, string>; body?: unknown; raw?: string },
): Promise<HttpResult> {
  try {
    const res = await fetch(url, {
      method: init.method,
      headers: { ...(init.body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...init.headers },
      body: init.raw ?? (init.body === undefined ? undefined : JSON.stringify(init.body)),
      signal: AbortSignal.timeout(HANG_MS),
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: String(res.status), json };
  } catch (err) {
    return { status: (err as Error).name === 'TimeoutError' ? 'hang' : 'network' };
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Picks web processes round-robin among the live ones: a client fails over on its next attempt. */
function roundRobin(bases: () => string[]): () => string {
  let i = 0;
  return () => {
    const live = bases();
    return live[i++ % Math.max(1, live.length)] ?? 'http://127.0.0.1:9';
  };
}

// ---------------------------------------------------------------- writers

export interface Writes {
  /** Logical writes the service acknowledged, by client key → the id it answered with. */
  acked: Map<string, string>;
  /** Logical writes given up on at the end of the run without an acknowledgement. */
  unacked: string[];
  /** Keys refused for good (a 4xx other than 429, or a final platform failure), with the answer. */
  refused: Map<string, string>;
  /** Acknowledged keys whose acknowledgement said queued, not done (a 202, an inbound 200): Redis alone had them then. */
  queued: Set<string>;
  /** Each 201 answer: when its request was sent and when the answer came (ms since the epoch). */
  created: { sentAt: number; at: number }[];
  tally: Tally;
}

export interface WriterSpec {
  webBases: () => string[];
  clients: number;
  pauseMs: number;
  /** Prefix of every client key (unique per scenario and kind). */
  tag: string;
  /** The request of logical write `key` (client `w`, its `n`th write); the same for every retry of it. */
  request(key: string, w: number, n: number): { path: string; headers: Record<string, string>; body: unknown };
  /** The id an acknowledgement names, or undefined when the answer is not an acknowledgement. */
  ackedId(status: string, json: any, key: string): string | undefined;
  /** A final refusal (not retried). @default any 4xx but 429 */
  refusal?(status: string): boolean;
  /** Whether an acknowledgement with `status` only says the write is queued. @default a 202 */
  queuedAck?(status: string): boolean;
}

/**
 * `clients` clients each making logical writes in a loop, `pauseMs` apart. Every logical write
 * has a client key and is retried with the identical request after a 503, any other 5xx, a
 * 429 or a dropped connection until it is acknowledged — what a careful client (or a platform
 * redelivering a webhook) does, and what lets the reconciliation tell a duplicate from a retry.
 */
export function startWriters(o: WriterSpec) {
  const out: Writes = { acked: new Map(), unacked: [], refused: new Map(), queued: new Set(), created: [], tally: tally() };
  const queuedAck = o.queuedAck ?? ((s: string) => s === '202');
  const next = roundRobin(o.webBases);
  const refusal = o.refusal ?? ((s: string) => /^4/.test(s) && s !== '429');
  let stopping = false;
  let giveUpAt = Infinity;

  const writeOne = async (key: string, w: number, n: number) => {
    const req = o.request(key, w, n);
    for (;;) {
      const sentAt = Date.now();
      const r = await call(`${next()}${req.path}`, { method: 'POST', headers: req.headers, body: req.body });
      out.tally.count(r.status);
      if (r.status === '201') out.created.push({ sentAt, at: Date.now() });
      const id = o.ackedId(r.status, r.json, key);
      if (id !== undefined) {
        out.acked.set(key, id);
        if (queuedAck(r.status)) out.queued.add(key);
        return;
      }
      if (refusal(r.status)) {
        out.refused.set(key, `${r.status} ${JSON.stringify(r.json)}`);
        return;
      }
      if (Date.now() > giveUpAt) {
        out.unacked.push(key);
        return;
      }
      await sleep(r.status === 'network' ? 50 : 200);
    }
  };

  const loops = Array.from({ length: o.clients }, async (_, w) => {
    for (let n = 0; !stopping; n++) {
      await writeOne(`${o.tag}-${w}-${n}`, w, n);
      await sleep(o.pauseMs);
    }
  });

  return {
    out,
    /** Stops starting new writes; writes in flight keep retrying for up to `graceMs`. */
    async stop(graceMs: number): Promise<Writes> {
      stopping = true;
      giveUpAt = Date.now() + graceMs;
      await Promise.all(loops);
      return out;
    },
  };
}

const accepted = (status: string, json: any) =>
  (status === '201' || status === '202') && typeof json?.id === 'string' ? json.id : undefined;

/** Custom events (POST /v1/events) with the client key as Idempotency-Key and in the payload. */
export const eventWrites = (app: AppCredentials, webBases: () => string[], clients: number, pauseMs: number, tag: string): WriterSpec => ({
  webBases,
  clients,
  pauseMs,
  tag,
  request: (key, w, n) => ({
    path: '/v1/events',
    headers: { ...app.headers, 'Idempotency-Key': key },
    body: { event_type: 'chaos.tick', payload: { key, w, n } },
  }),
  ackedId: accepted,
});

/**
 * Sends (POST /v1/messages) through a Telegram connection whose API is the fake; the text is
 * the client key, so the fake can tell a doubled send. Each goes to its own chat, so sends do
 * not queue behind one another (per-recipient order) more than the platform's budget asks.
 */
export const sendWrites = (
  app: AppCredentials,
  connectionId: string,
  webBases: () => string[],
  clients: number,
  pauseMs: number,
  tag: string,
): WriterSpec => ({
  webBases,
  clients,
  pauseMs,
  tag,
  request: (key, w, n) => ({
    path: '/v1/messages',
    headers: { ...app.headers, 'Idempotency-Key': key },
    body: { platform_connection_id: connectionId, to_external_id: String(1_000_000 + w * 100_000 + n), message: key },
  }),
  // A send that may have reached the platform answers 502 DELIVERY_UNCERTAIN with its message
  // id: the client has its outcome (failed, not resent), as with a 201.
  ackedId: (status, json) =>
    accepted(status, json) ??
    (status === '502' && json?.error?.code === 'DELIVERY_UNCERTAIN' ? json.error.details?.[0]?.message_id : undefined),
  // A send the platform refused for good answers 4xx or 502; retrying it changes nothing.
  refusal: (s) => (/^4/.test(s) && s !== '429') || s === '502',
});

/**
 * Signed inbound Telegram updates (POST {webhook_url} with the secret token), redelivered
 * unchanged until answered 2xx, as Telegram does. Acknowledged = 2xx; the id is the
 * external message id the ledger event will carry.
 */
export const inboundWrites = (
  webhookPath: string,
  secretToken: string,
  webBases: () => string[],
  clients: number,
  pauseMs: number,
  tag: string,
  updateBase: number,
): WriterSpec => ({
  webBases,
  clients,
  pauseMs,
  tag,
  request: (key, w, n) => {
    const chatId = 2_000_000 + w;
    const messageId = n + 1;
    const updateId = updateBase + w * 1_000_000 + n;
    return {
      path: webhookPath,
      headers: { 'X-Telegram-Bot-Api-Secret-Token': secretToken },
      body: {
        update_id: updateId,
        message: {
          message_id: messageId,
          date: Math.floor(Date.now() / 1000),
          chat: { id: chatId, type: 'private', first_name: 'Chaos' },
          from: { id: chatId, is_bot: false, first_name: 'Chaos' },
          text: key,
        },
      },
    };
  },
  // Answered once the update is queued: the platform does not send it again.
  queuedAck: () => true,
  ackedId: (status, _json, key) => {
    if (!/^2/.test(status)) return undefined;
    const [, w, n] = /-(\d+)-(\d+)$/.exec(key)!;
    return `${2_000_000 + Number(w)}:${Number(n) + 1}`;
  },
});

// ---------------------------------------------------------------- ledger readers

export interface ReaderLog {
  name: string;
  /** Event ids in the order the reader received them. */
  ids: string[];
  tally: Tally;
}

/**
 * A reader resuming by cursor: pages GET /v1/events?after=<cursor> from whichever web process
 * is next, so every page is a resume on a possibly different process. It must see every event
 * of its application once, in ledger order, whatever fails underneath.
 */
export function startCursorReader(o: { name: string; app: AppCredentials; webBases: () => string[]; idleMs: number }) {
  const log: ReaderLog = { name: o.name, ids: [], tally: tally() };
  const next = roundRobin(o.webBases);
  let cursor: string | undefined;
  let stopping = false;

  const loop = (async () => {
    for (;;) {
      const r = await call(`${next()}/v1/events?limit=500${cursor ? `&after=${encodeURIComponent(cursor)}` : ''}`, {
        method: 'GET',
        headers: o.app.headers,
      });
      log.tally.count(r.status);
      if (r.status !== '200') {
        await sleep(200);
        continue;
      }
      const page = r.json as { data: { id: string }[]; next_cursor?: string; has_more: boolean };
      for (const e of page.data) log.ids.push(e.id);
      if (page.next_cursor) cursor = page.next_cursor;
      if (page.data.length === 0 || !page.has_more) {
        if (stopping) return;
        await sleep(o.idleMs);
      }
    }
  })();

  return {
    log,
    /** Reads until it has caught up with the ledger as it is now, then stops. */
    async finish(): Promise<ReaderLog> {
      stopping = true;
      await loop;
      return log;
    },
  };
}

// ---------------------------------------------------------------- SSE readers

/**
 * A stream client as docs/guide.md describes one: reads GET /events/stream, and when the stream
 * ends or its web process dies, reconnects to the next live web process with
 * `Last-Event-ID: <last cursor seen>`. It must see every event of its application once,
 * in order, across every reconnect.
 */
export function startSseReader(o: { name: string; app: AppCredentials; webBases: () => string[]; first: number }) {
  const log: ReaderLog & { reconnects: number } = { name: o.name, ids: [], tally: tally(), reconnects: 0 };
  let cursor: string | undefined;
  let stopping = false;
  let current: AbortController | undefined;
  let connected!: () => void;
  const ready = new Promise<void>((r) => (connected = r));
  let turn = o.first;

  const readOnce = async (base: string) => {
    const ctl = new AbortController();
    current = ctl;
    const res = await fetch(`${base}/events/stream`, {
      headers: { Authorization: o.app.headers.Authorization, Accept: 'text/event-stream', ...(cursor ? { 'Last-Event-ID': cursor } : {}) },
      signal: ctl.signal,
    });
    log.tally.count(String(res.status));
    if (res.status !== 200 || !res.body) {
      await res.body?.cancel();
      return;
    }
    connected();
    const decoder = new TextDecoder();
    let buffer = '';
    let frameId: string | undefined;
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl).replace(/\r$/, '');
        buffer = buffer.slice(nl + 1);
        if (line.startsWith('id:')) frameId = line.slice(3).trim();
        else if (line.startsWith('data:')) {
          const event = JSON.parse(line.slice(5).trim()) as { id: string };
          log.ids.push(event.id);
          if (frameId) cursor = frameId;
          frameId = undefined;
        }
      }
    }
  };

  const loop = (async () => {
    while (!stopping) {
      const live = o.webBases();
      const base = live[turn++ % Math.max(1, live.length)];
      try {
        if (base) await readOnce(base);
      } catch (err) {
        if (stopping) return;
        log.tally.count((err as Error).name === 'AbortError' ? 'aborted' : 'dropped');
      }
      if (stopping) return;
      log.reconnects++;
      await sleep(100);
    }
  })();

  return {
    log,
    /** Resolves once the first stream is open (events from then on are this reader's to see). */
    ready,
    /** Waits (bounded) until the reader has `count` events, then closes it. */
    async finish(count: number, timeoutMs: number): Promise<ReaderLog & { reconnects: number }> {
      const deadline = Date.now() + timeoutMs;
      while (new Set(log.ids).size < count && Date.now() < deadline) await sleep(100);
      stopping = true;
      current?.abort();
      await loop;
      return log;
    },
  };
}

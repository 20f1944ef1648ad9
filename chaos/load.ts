/**
 * Steady load for the chaos harness, and what each client was told: the accounting that the
 * reconciliation compares with the ledger, the streams and the receivers.
 */
import type { AppCredentials } from './cluster.js';

/** A request that has not answered in this long counts as a hang (the service promises bounded answers). */
export const HANG_MS = 30_000;

export interface Tally {
  /** Responses by status (`503`) or failure (`network`, `hang`). */
  statuses: Record<string, number>;
  count(status: string): void;
}

export function tally(): Tally {
  const statuses: Record<string, number> = {};
  return { statuses, count: (s) => void (statuses[s] = (statuses[s] ?? 0) + 1) };
}

export interface HttpResult {
  status: string;
  json?: any;
}

/** One request; never throws: a refused connection or a hang is a status like any other. */
export async function call(url: string, init: { method: string; headers?: Record<string, string>; body?: unknown }): Promise<HttpResult> {
  try {
    const res = await fetch(url, {
      method: init.method,
      headers: { ...(init.body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...init.headers },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
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
export function roundRobin(bases: () => string[]): () => string {
  let i = 0;
  return () => {
    const live = bases();
    return live[i++ % Math.max(1, live.length)] ?? 'http://127.0.0.1:9';
  };
}

// ---------------------------------------------------------------- custom events

export interface EventWrites {
  /** Logical writes the service acknowledged (201 or 202), by client key → event id. */
  acked: Map<string, string>;
  /** Logical writes given up on at the end of the run without an acknowledgement. */
  unacked: string[];
  /** Keys refused with a 4xx other than 429 (a harness or service bug). */
  refused: Map<string, string>;
  tally: Tally;
}

/**
 * `writers` clients each posting custom events in a loop, `pauseMs` apart. Every logical write
 * carries a client key in its payload and as its Idempotency-Key, and is retried with the same
 * key after a 503, a 5xx or a dropped connection until it is acknowledged — what a careful
 * client does, and what lets the reconciliation tell a duplicate from a retry.
 */
export function startEventWriters(o: { app: AppCredentials; webBases: () => string[]; writers: number; pauseMs: number; tag: string }) {
  const out: EventWrites = { acked: new Map(), unacked: [], refused: new Map(), tally: tally() };
  const next = roundRobin(o.webBases);
  let stopping = false;
  let giveUpAt = Infinity;

  const writeOne = async (key: string, w: number, n: number) => {
    for (;;) {
      const r = await call(`${next()}/v1/events`, {
        method: 'POST',
        headers: { ...o.app.headers, 'Idempotency-Key': key },
        body: { event_type: 'chaos.tick', payload: { key, w, n } },
      });
      out.tally.count(r.status);
      if (r.status === '201' || r.status === '202') {
        out.acked.set(key, r.json.id);
        return;
      }
      if (/^4/.test(r.status) && r.status !== '429') {
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

  const loops = Array.from({ length: o.writers }, async (_, w) => {
    for (let n = 0; !stopping; n++) {
      await writeOne(`${o.tag}-${w}-${n}`, w, n);
      await sleep(o.pauseMs);
    }
  });

  return {
    out,
    /** Stops starting new writes; writes in flight keep retrying for up to `graceMs`. */
    async stop(graceMs: number): Promise<EventWrites> {
      stopping = true;
      giveUpAt = Date.now() + graceMs;
      await Promise.all(loops);
      return out;
    },
  };
}

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
      const r = await call(`${next()}/v1/events?limit=500${cursor ? `&after=${encodeURIComponent(cursor)}` : ''}`, { method: 'GET', headers: o.app.headers });
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

import type { ChangeStamps } from '../change-stamps.js';
import type { Sql } from '../db.js';
import type { Logger } from '../logger.js';

/** Why a tracked stream is being ended. */
export type StreamEndReason = 'shutdown' | 'revoked';

export interface RevokedKeyWatch {
  /** Watches `keyId` for as long as the stream lives; returns the function that stops watching. */
  add(keyId: string, end: (reason: StreamEndReason) => void): () => void;
  /** Runs one check now (tests; the timer runs the same). */
  check(): Promise<void>;
  /** Checks run, and the key lookups among them: the cost, for tests and the benchmark. */
  readonly stats: { checks: number; lookups: number };
  close(): void;
}

/**
 * Ends the open streams of revoked API keys. A stream authenticates once, when it opens; a
 * key revoked later (CLI or API, from any process) would otherwise keep it delivering until
 * STREAM_MAX_MS. Every `intervalMs` the process reads the api-keys change stamp, which
 * revocation moves in the same statement (src/auth/api-keys.ts) — the shared, coalesced
 * read the key cache already makes, so the steady cost is one tiny query per process per
 * tick, not one per stream. Only when the stamp moved, or new keys started streaming, is
 * the set of streaming key ids looked up, in one query. Reading the stamp before that query
 * means a revocation racing the query moves the stamp past what was read, and the next tick
 * catches it: a stream ends at most about two intervals after its key is revoked.
 */
export function createRevokedKeyWatch(sql: Sql, stamps: ChangeStamps, logger: Logger, options: { intervalMs: number }): RevokedKeyWatch {
  const streams = new Map<string, Set<(reason: StreamEndReason) => void>>();
  /** Keys that began streaming since the last check: authenticated under a stamp this watch has not seen. */
  let unchecked = new Set<string>();
  let seenStamp: number | undefined;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  const stats = { checks: 0, lookups: 0 };

  const check = async () => {
    if (streams.size === 0) return;
    stats.checks++;
    const fresh = unchecked;
    unchecked = new Set();
    try {
      const stamp = await stamps.read('api-keys');
      const keys = stamp === undefined || stamp !== seenStamp ? [...streams.keys()] : [...fresh].filter((k) => streams.has(k));
      if (keys.length > 0) {
        stats.lookups++;
        // A stream opened by a portal session is tracked by the session's id: it ends with the
        // session, or with the key that minted the session.
        const revoked = await sql<{ id: string }[]>`
          SELECT id FROM api_keys WHERE id = ANY(${keys}::uuid[]) AND revoked_at IS NOT NULL
          UNION ALL
          SELECT s.id FROM portal_sessions s LEFT JOIN api_keys k ON k.id = s.created_by_key_id
          WHERE s.id = ANY(${keys}::uuid[]) AND (s.revoked_at IS NOT NULL OR s.expires_at <= now() OR k.revoked_at IS NOT NULL)`;
        for (const { id } of revoked) for (const end of [...(streams.get(id) ?? [])]) end('revoked');
      }
      seenStamp = stamp;
    } catch (err) {
      // Checked again next tick, these keys included.
      for (const k of fresh) unchecked.add(k);
      logger.warn({ err }, 'revoked-key check of open streams failed');
    }
  };
  const tick = () => {
    running ??= check().finally(() => (running = undefined));
    return running;
  };

  return {
    add(keyId, end) {
      let ends = streams.get(keyId);
      if (!ends) streams.set(keyId, (ends = new Set()));
      ends.add(end);
      unchecked.add(keyId);
      if (!timer) {
        timer = setInterval(tick, options.intervalMs);
        timer.unref();
      }
      return () => {
        ends.delete(end);
        if (ends.size === 0 && streams.get(keyId) === ends) streams.delete(keyId);
        if (streams.size === 0 && timer) {
          clearInterval(timer);
          timer = undefined;
        }
      };
    },
    check: tick,
    stats,
    close() {
      if (timer) clearInterval(timer);
      timer = undefined;
      streams.clear();
    },
  };
}

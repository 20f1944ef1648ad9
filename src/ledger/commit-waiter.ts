import type { Sql } from '../db.js';
import type { WakeHub } from './wake-hub.js';

export interface CommitWaiter<T = true> {
  /** Resolves with the outcome once it exists (e.g. the event is in the ledger), undefined after `timeoutMs`. */
  wait(appId: string, id: string, timeoutMs: number): Promise<T | undefined>;
  /**
   * Resolves the waits on `id` now: with the outcome a worker reported after recording it,
   * or undefined when the caller gave up (its enqueue failed).
   */
  settle(appId: string, id: string, outcome: T | undefined): void;
}

/** Which of `ids` have their outcome recorded, and what it is — the truth the waiter trusts. */
export type OutcomeCheck<T = true> = (sql: Sql, appId: string, ids: string[]) => Promise<Iterable<[string, T]>>;

/** Where an event landed in its application's ledger. */
export interface CommittedPosition {
  seq: number;
  /** ISO 8601 with microseconds, as readers see it. */
  created_at: string;
}

/** What a commit report says of an event: where it landed, or why the ledger refused it for good. */
export type CommitOutcome = CommittedPosition | { refused: string };

export const eventCommitted: OutcomeCheck<CommittedPosition> = async (sql, appId, ids) =>
  (
    await sql<({ id: string } & CommittedPosition)[]>`
      SELECT id, seq, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at
        FROM events WHERE app_id = ${appId} AND id = ANY(${ids}::uuid[])`
  ).map((r) => [r.id, { seq: r.seq, created_at: r.created_at }]);

/**
 * Waits on an outcome itself — the ledger row — not on a queue signal: each wake of the
 * application triggers one query for all its pending ids, and a periodic check covers a lost
 * wake, so a missed signal can only make an answer late, never wrong. Without `wakes`, only the
 * periodic check runs: the waits are settled by reports (`settle`) from whoever recorded the
 * outcome, and the check only covers a report that got lost.
 */
export function createCommitWaiter<T = true>(
  sql: Sql,
  wakes: WakeHub | undefined,
  check: OutcomeCheck<T>,
  recheckMs = 250,
): CommitWaiter<T> {
  const pending = new Map<string, Map<string, Set<(outcome: T | undefined) => void>>>();
  const unsubs = new Map<string, () => void>();
  const checking = new Set<string>();
  /** Apps woken while their check ran: that check may have missed the commit, so run again at once. */
  const wokenDuringCheck = new Set<string>();

  const recheck = async (appId: string) => {
    const ids = pending.get(appId);
    if (!ids || ids.size === 0) return;
    if (checking.has(appId)) {
      wokenDuringCheck.add(appId);
      return;
    }
    checking.add(appId);
    try {
      for (const [id, outcome] of await check(sql, appId, [...ids.keys()])) settle(appId, id, outcome);
    } catch {
      // The periodic check tries again.
    } finally {
      checking.delete(appId);
    }
    if (wokenDuringCheck.delete(appId)) void recheck(appId);
  };

  const settle = (appId: string, id: string, outcome: T | undefined) => {
    const ids = pending.get(appId);
    const resolvers = ids?.get(id);
    if (!ids || !resolvers) return;
    ids.delete(id);
    for (const r of resolvers) r(outcome);
    if (ids.size === 0) {
      pending.delete(appId);
      unsubs.get(appId)?.();
      unsubs.delete(appId);
    }
  };

  const timer = setInterval(() => {
    for (const appId of pending.keys()) void recheck(appId);
  }, recheckMs);
  timer.unref();

  return {
    settle,
    wait(appId, eventId, timeoutMs) {
      return new Promise<T | undefined>((resolve) => {
        let ids = pending.get(appId);
        if (!ids) {
          pending.set(appId, (ids = new Map()));
          if (wakes)
            unsubs.set(
              appId,
              wakes.on(appId, () => void recheck(appId)),
            );
        }
        let resolvers = ids.get(eventId);
        if (!resolvers) ids.set(eventId, (resolvers = new Set()));
        const t = setTimeout(() => {
          resolvers!.delete(done);
          if (resolvers!.size === 0) settle(appId, eventId, undefined);
          resolve(undefined);
        }, timeoutMs);
        const done = (outcome: T | undefined) => {
          clearTimeout(t);
          resolve(outcome);
        };
        resolvers.add(done);
      });
    },
  };
}

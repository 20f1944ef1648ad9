import type { Sql } from '../db.js';
import type { WakeHub } from './wake-hub.js';

export interface CommitWaiter {
  /** Resolves true once the outcome exists (e.g. the event is in the ledger), false after `timeoutMs`. */
  wait(appId: string, id: string, timeoutMs: number): Promise<boolean>;
}

/** Which of `ids` have their outcome recorded — the truth the waiter trusts. */
export type OutcomeCheck = (sql: Sql, appId: string, ids: string[]) => Promise<string[]>;

export const eventCommitted: OutcomeCheck = async (sql, appId, ids) =>
  (await sql<{ id: string }[]>`SELECT id FROM events WHERE app_id = ${appId} AND id = ANY(${ids}::uuid[])`).map((r) => r.id);

/**
 * Waits on an outcome itself — the ledger row — not on a queue signal: each wake of the
 * application triggers one query for all its pending ids, and a periodic check covers a lost
 * wake, so a missed signal can only make an answer late, never wrong.
 */
export function createCommitWaiter(sql: Sql, wakes: WakeHub, check: OutcomeCheck = eventCommitted, recheckMs = 250): CommitWaiter {
  const pending = new Map<string, Map<string, Set<(found: boolean) => void>>>();
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
      for (const id of await check(sql, appId, [...ids.keys()])) settle(appId, id, true);
    } catch {
      // The periodic check tries again.
    } finally {
      checking.delete(appId);
    }
    if (wokenDuringCheck.delete(appId)) void recheck(appId);
  };

  const settle = (appId: string, id: string, found: boolean) => {
    const ids = pending.get(appId);
    const resolvers = ids?.get(id);
    if (!ids || !resolvers) return;
    ids.delete(id);
    for (const r of resolvers) r(found);
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
    wait(appId, eventId, timeoutMs) {
      return new Promise<boolean>((resolve) => {
        let ids = pending.get(appId);
        if (!ids) {
          pending.set(appId, (ids = new Map()));
          unsubs.set(appId, wakes.on(appId, () => void recheck(appId)));
        }
        let resolvers = ids.get(eventId);
        if (!resolvers) ids.set(eventId, (resolvers = new Set()));
        const t = setTimeout(() => {
          resolvers!.delete(done);
          if (resolvers!.size === 0) settle(appId, eventId, false);
          resolve(false);
        }, timeoutMs);
        const done = (found: boolean) => {
          clearTimeout(t);
          resolve(found);
        };
        resolvers.add(done);
      });
    },
  };
}

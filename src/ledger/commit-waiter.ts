import type { Sql } from '../db.js';
import type { WakeHub } from './wake-hub.js';

export interface CommitWaiter {
  /** Resolves true once the event is in the ledger, false after `timeoutMs`. */
  wait(appId: string, eventId: string, timeoutMs: number): Promise<boolean>;
}

/**
 * Waits on the outcome itself — the ledger row — not on a queue signal: each wake of the
 * application triggers one query for all its pending ids, and a periodic check covers a lost
 * wake, so a missed signal can only make an answer late, never wrong.
 */
export function createCommitWaiter(sql: Sql, wakes: WakeHub, recheckMs = 250): CommitWaiter {
  const pending = new Map<string, Map<string, Set<(found: boolean) => void>>>();
  const unsubs = new Map<string, () => void>();
  const checking = new Set<string>();

  const check = async (appId: string) => {
    const ids = pending.get(appId);
    if (!ids || ids.size === 0 || checking.has(appId)) return;
    checking.add(appId);
    try {
      const rows = await sql<{ id: string }[]>`SELECT id FROM events WHERE app_id = ${appId} AND id = ANY(${[...ids.keys()]}::uuid[])`;
      for (const { id } of rows) settle(appId, id, true);
    } catch {
      // The periodic check tries again.
    } finally {
      checking.delete(appId);
    }
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
    for (const appId of pending.keys()) void check(appId);
  }, recheckMs);
  timer.unref();

  return {
    wait(appId, eventId, timeoutMs) {
      return new Promise<boolean>((resolve) => {
        let ids = pending.get(appId);
        if (!ids) {
          pending.set(appId, (ids = new Map()));
          unsubs.set(appId, wakes.on(appId, () => void check(appId)));
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

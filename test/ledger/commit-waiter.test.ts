import { describe, expect, it } from 'vitest';
import type { Sql } from '../../src/db.js';
import { createCommitWaiter } from '../../src/ledger/commit-waiter.js';
import type { WakeHub, WakeListener } from '../../src/ledger/wake-hub.js';

/** An in-process hub: `wake(app)` calls the listeners as the Redis subscriber would. */
function hub(): WakeHub & { wake(appId: string): void } {
  const listeners = new Map<string, Set<WakeListener>>();
  return {
    ready: Promise.resolve(),
    subscribed: () => Promise.resolve(),
    on(appId, l) {
      if (!listeners.has(appId)) listeners.set(appId, new Set());
      listeners.get(appId)!.add(l);
      return () => listeners.get(appId)!.delete(l);
    },
    wake(appId) {
      for (const l of listeners.get(appId) ?? []) l(appId);
    },
    async close() {},
  };
}

describe('commit waiter', () => {
  it('a wake that arrives while a check is running triggers another check at once, not at the next periodic one', async () => {
    const wakes = hub();
    let committed = false;
    let calls = 0;
    let releaseFirst!: () => void;
    const firstCheck = new Promise<void>((r) => (releaseFirst = r));
    const check = async (_sql: Sql, _app: string, ids: string[]) => {
      calls++;
      if (calls === 1) {
        // The commit lands (and its wake fires) while this first check is still reading.
        await firstCheck;
        return [];
      }
      return committed ? ids.map((id): [string, true] => [id, true]) : [];
    };
    const waiter = createCommitWaiter(undefined as unknown as Sql, wakes, check, 60_000);
    const started = Date.now();
    const done = waiter.wait('app', 'ev1', 5_000);
    wakes.wake('app'); // starts check 1
    committed = true;
    wakes.wake('app'); // arrives during check 1
    releaseFirst();
    expect(await done).toBe(true);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(calls).toBe(2);
  });
});

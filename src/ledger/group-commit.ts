import { isUnavailable } from '../errors.js';

/**
 * Gathers items from many concurrent callers into batches: while one flush runs, new items
 * queue up and go together in the next. Under load, batches grow on their own; when idle,
 * an item is flushed at once (no added latency).
 */
export function createGroupCommit<T, R>(flush: (items: T[]) => Promise<R>, maxBatch: number): (item: T) => Promise<R> {
  let pending: { item: T; resolve: (r: R) => void; reject: (e: unknown) => void }[] = [];
  let running = false;

  const drain = async () => {
    if (running || pending.length === 0) return;
    running = true;
    const batch = pending.slice(0, maxBatch);
    pending = pending.slice(batch.length);
    try {
      const result = await flush(batch.map((p) => p.item));
      for (const p of batch) p.resolve(result);
    } catch (err) {
      // One item the database refuses (bad data) must not fail the callers it happened to
      // share a batch with: each is flushed on its own, so only the bad one fails. An outage
      // fails them all at once instead — alone they would only fail again, one by one.
      if (batch.length === 1 || isUnavailable(err)) for (const p of batch) p.reject(err);
      else {
        for (const p of batch) {
          try {
            p.resolve(await flush([p.item]));
          } catch (e) {
            p.reject(e);
          }
        }
      }
    } finally {
      running = false;
      void drain();
    }
  };

  return (item) =>
    new Promise<R>((resolve, reject) => {
      // Let the callers of this tick join the batch before flushing: one wake-up for all of
      // them (a flush under way drains what arrived meanwhile when it ends).
      if (pending.push({ item, resolve, reject }) === 1) setImmediate(() => void drain());
    });
}

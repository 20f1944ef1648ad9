import { isUnavailable } from '../errors.js';
import { ItemFailed, tickBatch } from '../tick-batch.js';

/**
 * Gathers items from many concurrent callers into batches, one batch at a time: while one
 * flush runs, new items queue up and go together in the next (src/tick-batch.ts, serial).
 * Every caller of a batch gets the flush's result.
 */
export function createGroupCommit<T, R>(flush: (items: T[]) => Promise<R>, maxBatch: number): (item: T) => Promise<R> {
  return tickBatch<T, R>(
    async (items) => {
      try {
        const result = await flush(items);
        return items.map(() => result);
      } catch (err) {
        // One item the database refuses (bad data) must not fail the callers it happened to
        // share a batch with: each is flushed on its own, so only the bad one fails. An outage
        // fails them all at once instead — alone they would only fail again, one by one.
        if (items.length === 1 || isUnavailable(err)) throw err;
        const outputs: (R | ItemFailed)[] = [];
        for (const item of items) outputs.push(await flush([item]).catch((e: unknown) => new ItemFailed(e)));
        return outputs;
      }
    },
    { maxBatch, serial: true },
  );
}

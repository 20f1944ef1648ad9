import { tickBatch } from '../tick-batch.js';

/**
 * Gathers items from many concurrent callers into batches, one batch at a time: while one
 * flush runs, new items queue up and go together in the next (src/tick-batch.ts, serial).
 * Every caller of a batch gets the flush's result. A batch the database refuses for one item's
 * data is split by the tick batch until that item is alone, so only its caller fails.
 */
export function createGroupCommit<T, R>(flush: (items: T[]) => Promise<R>, maxBatch: number): (item: T) => Promise<R> {
  return tickBatch<T, R>(
    async (items) => {
      const result = await flush(items);
      return items.map(() => result);
    },
    { maxBatch, serial: true },
  );
}

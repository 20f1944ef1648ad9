import { isItemFault } from './errors.js';

/** What `run` answers for an item that failed on its own, while the rest of its batch succeeded. */
export class ItemFailed {
  constructor(readonly error: unknown) {}
}

export interface TickBatchOptions {
  /** The most items one batch carries; a burst larger than this goes out in several. */
  maxBatch: number;
  /**
   * One batch at a time: items arriving while a batch runs go together in the next, which
   * starts when it ends (a group commit; under load, batches grow on their own). Without it,
   * each turn's batch starts at once, overlapping the round trips of the ones before.
   */
  serial?: boolean;
  /**
   * Whether an error `run` threw can be one item's fault (data the store refuses) rather than
   * the whole batch's (an outage, a lost session). Then the batch is bisected and each half
   * runs on its own, until the item at fault runs alone and only its caller gets the error:
   * one poison item cannot fail the callers it happened to share a batch with. Any other error
   * fails the whole batch at once, since alone its items would only fail again, one by one.
   * @default isItemFault (src/errors.ts)
   */
  itemFault?: (err: unknown) => boolean;
}

/**
 * The one way callers share a round trip: the calls made during one turn of the event loop
 * (every request the current poll phase read) are handed to `run` together, which answers
 * one output per item, in order — or an `ItemFailed` for an item that failed alone. If `run`
 * throws an item's fault (`options.itemFault`), the batch is split in halves, run in order,
 * so only the poison item's caller gets it; any other error reaches every caller of the batch.
 * When idle, an item goes out after the current turn (no timer, no added latency).
 */
export function tickBatch<I, O>(run: (items: I[]) => Promise<(O | ItemFailed)[]>, options: TickBatchOptions): (item: I) => Promise<O> {
  type Waiting = { item: I; resolve: (o: O) => void; reject: (e: unknown) => void };
  let pending: Waiting[] = [];
  let running = false;
  let scheduled = false;

  const itemFault = options.itemFault ?? isItemFault;

  const start = async (batch: Waiting[]): Promise<void> => {
    let outputs: (O | ItemFailed)[];
    try {
      outputs = await run(batch.map((w) => w.item));
    } catch (err) {
      if (batch.length > 1 && itemFault(err)) {
        // Halves in order (the first settles before the second starts), so items keep the
        // order they arrived in; k poison items cost about 2·k·log2(n) runs, not n.
        const half = Math.ceil(batch.length / 2);
        await start(batch.slice(0, half));
        await start(batch.slice(half));
      } else {
        for (const w of batch) w.reject(err);
      }
      return;
    }
    batch.forEach((w, i) => {
      const out = outputs[i];
      if (out instanceof ItemFailed) w.reject(out.error);
      else w.resolve(out);
    });
  };

  const take = () => {
    const batch = pending.slice(0, options.maxBatch);
    pending = pending.slice(batch.length);
    return batch;
  };

  const flush = async () => {
    scheduled = false;
    if (!options.serial) {
      while (pending.length) void start(take());
      return;
    }
    if (running) return;
    running = true;
    try {
      while (pending.length) await start(take());
    } finally {
      running = false;
    }
  };

  return (item) =>
    new Promise<O>((resolve, reject) => {
      pending.push({ item, resolve, reject });
      if (!options.serial && pending.length >= options.maxBatch) void flush();
      else if (!scheduled && !running) {
        scheduled = true;
        setImmediate(() => void flush());
      }
    });
}

/**
 * Coalesces the point reads of one tick into one query: concurrent callers asking for their
 * own row share a single `WHERE id = ANY(...)` round trip instead of one each.
 */
export function batchLoader<K, V>(loadMany: (keys: K[]) => Promise<Map<K, V>>, maxBatch = 500): (key: K) => Promise<V | undefined> {
  return tickBatch<K, V | undefined>(
    async (keys) => {
      const found = await loadMany([...new Set(keys)]);
      return keys.map((k) => found.get(k));
    },
    { maxBatch },
  );
}

import { tickBatch } from '../tick-batch.js';

/**
 * Coalesces the point reads of one tick into one query: concurrent jobs asking for their own
 * row share a single `WHERE id = ANY(...)` round trip instead of one each.
 */
export function createBatchLoader<K, V>(loadMany: (keys: K[]) => Promise<Map<K, V>>, maxBatch = 500): (key: K) => Promise<V | undefined> {
  return tickBatch<K, V | undefined>(
    async (keys) => {
      const found = await loadMany([...new Set(keys)]);
      return keys.map((k) => found.get(k));
    },
    { maxBatch },
  );
}

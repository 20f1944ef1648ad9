/**
 * Coalesces the point reads of one tick into one query: concurrent jobs asking for their own
 * row share a single `WHERE id = ANY(...)` round trip instead of one each.
 */
export function createBatchLoader<K, V>(loadMany: (keys: K[]) => Promise<Map<K, V>>, maxBatch = 500): (key: K) => Promise<V | undefined> {
  let pending: { key: K; resolve: (v: V | undefined) => void; reject: (e: unknown) => void }[] = [];
  let scheduled = false;
  const flush = async () => {
    scheduled = false;
    while (pending.length) {
      const batch = pending.splice(0, maxBatch);
      try {
        const found = await loadMany([...new Set(batch.map((p) => p.key))]);
        for (const p of batch) p.resolve(found.get(p.key));
      } catch (err) {
        for (const p of batch) p.reject(err);
      }
    }
  };
  return (key) =>
    new Promise((resolve, reject) => {
      pending.push({ key, resolve, reject });
      if (!scheduled) {
        scheduled = true;
        setImmediate(() => void flush());
      }
    });
}

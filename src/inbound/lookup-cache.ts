/**
 * A small time-bounded memo for the receiver's per-delivery lookups (connection by id, the
 * shared Meta URLs, routing candidates). Platforms deliver in bursts to the same few
 * connections; reading and decrypting each one from Postgres per request would cost more
 * than everything else the receiver does. Concurrent misses for one key share one load.
 *
 * The price is staleness: a disabled connection or a changed secret takes effect within
 * `ttlMs` in each web process.
 */
export interface LookupCache<V> {
  get(key: string, load: () => Promise<V>): Promise<V>;
}

export function lookupCache<V>(ttlMs: number, maxEntries = 10_000): LookupCache<V> {
  const entries = new Map<string, { value: Promise<V>; until: number }>();
  return {
    get(key, load) {
      if (ttlMs <= 0) return load();
      const now = Date.now();
      const hit = entries.get(key);
      if (hit && hit.until > now) return hit.value;
      // Bounded memory under a flood of distinct (made-up) ids: start over rather than grow.
      if (entries.size >= maxEntries) entries.clear();
      const value = load();
      entries.set(key, { value, until: now + ttlMs });
      // A failed load (database down) is not remembered: the next delivery tries again.
      value.catch(() => entries.delete(key));
      return value;
    },
  };
}

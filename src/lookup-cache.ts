/**
 * A small time-bounded memo for hot lookups of rarely changing rows: the inbound receiver's
 * per-delivery lookups (connection by id, the shared Meta URLs, routing candidates) and the
 * send path's connection (src/connections/connection-cache.ts). Traffic comes in bursts to the
 * same few connections; reading and decrypting each one from Postgres per request would cost
 * more than everything else the request does. Concurrent misses for one key share one load.
 *
 * A connection's update or deletion clears the caches of every process at once (see
 * src/change-feed.ts); `ttlMs` only bounds the staleness when that announcement is lost (a
 * subscriber that was reconnecting clears on reconnect, so even then rarely).
 */
export interface LookupCache<V> {
  get(key: string, load: () => Promise<V>): Promise<V>;
  /** Forgets everything: the next lookup of every key loads again. */
  clear(): void;
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
      const entry = { value, until: now + ttlMs };
      entries.set(key, entry);
      // A failed load (database down) is not remembered: the next delivery tries again.
      value.catch(() => {
        if (entries.get(key) === entry) entries.delete(key);
      });
      return value;
    },
    clear() {
      entries.clear();
    },
  };
}

import type { Sql } from './db.js';
import { createGroupCommit } from './ledger/group-commit.js';

/**
 * Change stamps let every process cache records that rarely change (API keys, event schemas)
 * and still see a change at once. A change moves its stamp in the same transaction
 * (`bumpStamp`), and a cached copy is used only while the stamp read for the current request
 * equals the one read before the copy was loaded. The read is issued after the request
 * arrived, so it cannot miss a change that committed before; invalidation messages would
 * leave a window while they travel. Reads of requests arriving together share one query,
 * sent after they all arrived, so a request costs a fraction of a round trip instead of a
 * lookup per record; and since it goes to PostgreSQL, an outage still answers 503.
 */
export const STAMPS = ['api-keys', 'event-schemas'] as const;
export type StampName = (typeof STAMPS)[number];
type Stamps = Map<string, number>;

/** Upper bound on a cached copy's life (memory hygiene; correctness comes from the stamps). */
const CACHE_TTL_MS = 10 * 60_000;
const MAX_ENTRIES = 10_000;

/** A CTE member that moves `name`'s stamp when `changed` (a CTE of the statement) returned rows. */
export function bumpStamp(sql: Sql, name: StampName, changed: string) {
  return sql`UPDATE change_stamps SET stamp = stamp + 1 WHERE name = ${name} AND EXISTS (SELECT 1 FROM ${sql(changed)})`;
}

export interface StampedCache<V> {
  /**
   * The cached value of `key` when its stamp has not moved since it was loaded, else
   * `load()`'s (kept for next time unless `keep` says otherwise).
   */
  get(key: string, load: () => Promise<V>, keep?: (value: V) => boolean): Promise<V>;
}

/** One process's (one pool's) view of the change stamps: a shared read and a cache per stamp. */
export interface ChangeStamps {
  /**
   * The current value of `name`'s stamp (undefined before the migration that creates it), read
   * with the same shared query as the caches: readers arriving together cost one round trip.
   */
  read(name: StampName): Promise<number | undefined>;
  /** The cache of the records `name` stamps (one per stamp). */
  cache<V>(name: StampName): StampedCache<V>;
}

export function createChangeStamps(sql: Sql): ChangeStamps {
  const readAll = createGroupCommit<void, Stamps>(
    async () =>
      new Map((await sql<{ name: string; stamp: number }[]>`SELECT name, stamp FROM change_stamps`).map((r) => [r.name, r.stamp])),
    100_000,
  );
  const read = () => readAll();
  const caches = new Map<StampName, StampedCache<unknown>>();
  return {
    read: async (name) => (await read()).get(name),
    cache<V>(name: StampName) {
      let cache = caches.get(name) as StampedCache<V> | undefined;
      if (!cache) caches.set(name, (cache = createStampedCache<V>(read, name)) as StampedCache<unknown>);
      return cache;
    },
  };
}

function createStampedCache<V>(read: () => Promise<Stamps>, name: StampName): StampedCache<V> {
  const entries = new Map<string, { value: V; stamp: number; at: number }>();
  return {
    async get(key, load, keep) {
      const stamp = (await read()).get(name);
      // Without its row (a database not migrated yet) nothing could move the stamp: no caching.
      if (stamp === undefined) return load();
      const hit = entries.get(key);
      if (hit && hit.stamp === stamp && Date.now() - hit.at < CACHE_TTL_MS) return hit.value;
      const value = await load();
      if (keep && !keep(value)) return value;
      if (entries.size >= MAX_ENTRIES) entries.clear();
      entries.set(key, { value, stamp, at: Date.now() });
      return value;
    },
  };
}

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

interface Shared {
  read: () => Promise<Stamps>;
  caches: Map<StampName, StampedCache<unknown>>;
}
const shared = new WeakMap<Sql, Shared>();

function sharedFor(sql: Sql): Shared {
  let s = shared.get(sql);
  if (!s) {
    const read = createGroupCommit<void, Stamps>(
      async () => new Map((await sql<{ name: string; stamp: number }[]>`SELECT name, stamp FROM change_stamps`).map((r) => [r.name, r.stamp])),
      100_000,
    );
    shared.set(sql, (s = { read: () => read(), caches: new Map() }));
  }
  return s;
}

/**
 * The current value of `name`'s stamp (undefined before the migration that creates it), read
 * with the same shared query as the caches: readers arriving together cost one round trip.
 */
export async function readStamp(sql: Sql, name: StampName): Promise<number | undefined> {
  return (await sharedFor(sql).read()).get(name);
}

/** This process's (this pool's) cache of the records `name` stamps. */
export function stampedCacheFor<V>(sql: Sql, name: StampName): StampedCache<V> {
  const s = sharedFor(sql);
  let cache = s.caches.get(name) as StampedCache<V> | undefined;
  if (!cache) {
    const entries = new Map<string, { value: V; stamp: number; at: number }>();
    cache = {
      async get(key, load, keep) {
        const stamp = (await s.read()).get(name);
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
    s.caches.set(name, cache as StampedCache<unknown>);
  }
  return cache;
}

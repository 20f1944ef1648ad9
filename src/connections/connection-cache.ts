import { watchChanges } from '../change-feed.js';
import type { Deps } from '../deps.js';
import { lookupCache } from '../lookup-cache.js';
import { loadConnection, type Connection } from './connections.js';

/**
 * The send path's connections (the web's validation, the send worker's platform call), each
 * loaded and decrypted once per process rather than once per message. Held by the process's
 * services, never a module singleton.
 */
export interface ConnectionCache {
  /** Connection `id` of application `appId` with its secrets opened; undefined when that application has no such connection. */
  get(appId: string, id: string): Promise<Connection | undefined>;
  /** Calls `listener` on every change of any connection, as the cache clears itself (for memories keyed by connection). */
  onChange(listener: () => void): void;
  /** Resolves once the change feed is subscribed. */
  ready: Promise<void>;
}

/**
 * Every update, disable, re-key or delete of a connection is announced on the `connections`
 * change feed and clears the whole cache (changes are rare; clearing everything needs no
 * index by id), so the next send in every process loads the row again. CONNECTION_CACHE_MS
 * only bounds staleness when an announcement is lost.
 */
export function createConnectionCache(deps: Deps): ConnectionCache {
  const entries = lookupCache<Connection | undefined>(deps.config.CONNECTION_CACHE_MS);
  const listeners = new Set<() => void>();
  const watch = watchChanges(deps, 'connections', () => {
    entries.clear();
    for (const l of listeners) l();
  });
  return {
    onChange: (listener) => void listeners.add(listener),
    // The application is part of the key: one application's request can never be answered
    // with another's connection, whatever id it names.
    get: (appId, id) => entries.get(`${appId}/${id}`, () => loadConnection(deps, appId, id)),
    ready: watch.ready,
  };
}

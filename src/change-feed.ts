import type { Deps } from './deps.js';
import { createRedis, watchConnection } from './redis.js';

/**
 * Changes announced to every process over Redis pub/sub, for the per-process caches of
 * things that hold secrets or routing (platform connections, webhook subscriptions): a
 * disabled, deleted or re-keyed one must take effect everywhere at once, not when a cache
 * entry happens to expire.
 *
 * Pub/sub is fire-and-forget, so a watcher is told to drop everything (`onChange()` without
 * an id) once subscribed — what it cached before may predate a change — and after every
 * reconnection, since announcements made while it was away are gone. Caches keep a TTL as
 * the bound on staleness should an announcement itself be lost.
 */
export type ChangeTopic = 'connections' | 'webhook-subscriptions';

/** The watchers of each topic in this process (`Deps.changeWatchers`). */
export type ChangeWatchers = Map<ChangeTopic, Set<(id?: string) => void>>;

const channel = (prefix: string, topic: ChangeTopic) => `${prefix}:changes:${topic}`;

/**
 * Tells every process that `id` changed. Called after the change committed: a failed
 * announcement is logged rather than failing a change that is already made. This process's own
 * watchers are told at once, before the answer to the change goes out: a client that changes a
 * connection and then uses it on the same process must not wait on pub/sub's round trip.
 */
export async function announceChange(deps: Deps, topic: ChangeTopic, id: string): Promise<void> {
  for (const onChange of deps.changeWatchers.get(topic) ?? []) onChange(id);
  try {
    await deps.redis.publish(channel(deps.config.REDIS_PREFIX, topic), id);
  } catch (err) {
    deps.logger.warn(
      { err: (err as Error).message, topic, id },
      'change not announced; other processes pick it up when their cache entries expire',
    );
  }
}

export interface ChangeWatch {
  /** Resolves once subscribed. */
  ready: Promise<void>;
  close(): Promise<void>;
}

/**
 * Calls `onChange(id)` for every announced change of `topic`, and `onChange()` (drop
 * everything) once subscribed and on every reconnection. Closed with the process's deps.
 */
export function watchChanges(deps: Deps, topic: ChangeTopic, onChange: (id?: string) => void): ChangeWatch {
  const local = deps.changeWatchers.get(topic) ?? new Set();
  deps.changeWatchers.set(topic, local.add(onChange));
  const sub = watchConnection(createRedis(deps.config.REDIS_URL, 'blocking'), `${topic}-changes`, deps.logger);
  sub.on('message', (_channel: string, id: string) => onChange(id));
  sub.on('ready', () => onChange());
  const ready = sub.subscribe(channel(deps.config.REDIS_PREFIX, topic)).then(() => onChange());
  ready.catch((err) => deps.logger.warn({ err: (err as Error).message, topic }, 'change subscription failed'));
  let closed: Promise<void> | undefined;
  const close = () => {
    local.delete(onChange);
    return (closed ??= sub.quit().then(
      () => undefined,
      () => sub.disconnect(),
    ));
  };
  deps.closers.push(close);
  return { ready, close };
}

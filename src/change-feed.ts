import type { Deps } from './deps.js';
import { createRedis, type Redis, watchConnection } from './redis.js';

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
const TOPICS = ['connections', 'webhook-subscriptions'] as const;
export type ChangeTopic = (typeof TOPICS)[number];

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

/** A process's one subscriber connection for every topic, and the subscription of each topic on it. */
interface Feed {
  sub: Redis;
  subscribed: Map<ChangeTopic, Promise<void>>;
}
/** Keyed by the process's watchers (one per Deps), so every watcher of a process shares one feed. */
const feeds = new WeakMap<ChangeWatchers, Feed>();

/** The process's feed, connected on first use and closed with its deps. */
function feedOf(deps: Deps): Feed {
  const known = feeds.get(deps.changeWatchers);
  if (known) return known;
  const sub = watchConnection(
    createRedis(deps.config.redis, 'blocking', { connectionName: `${deps.config.REDIS_PREFIX}:changes` }),
    'changes',
    deps,
  );
  const feed: Feed = { sub, subscribed: new Map() };
  const topicOf = new Map(TOPICS.map((t) => [channel(deps.config.REDIS_PREFIX, t), t]));
  sub.on('message', (ch: string, id: string) => {
    const topic = topicOf.get(ch);
    for (const onChange of (topic && deps.changeWatchers.get(topic)) || []) onChange(id);
  });
  // A reconnection resubscribes (ioredis), but what was announced meanwhile is gone.
  sub.on('ready', () => {
    for (const [topic] of feed.subscribed) for (const onChange of deps.changeWatchers.get(topic) ?? []) onChange();
  });
  feeds.set(deps.changeWatchers, feed);
  deps.closers.push(() => {
    feeds.delete(deps.changeWatchers);
    return sub.quit().then(
      () => undefined,
      () => sub.disconnect(),
    );
  });
  return feed;
}

/**
 * Calls `onChange(id)` for every announced change of `topic`, and `onChange()` (drop
 * everything) once subscribed and on every reconnection. Every watcher of a process shares one
 * subscriber connection, closed with the process's deps.
 */
export function watchChanges(deps: Deps, topic: ChangeTopic, onChange: (id?: string) => void): ChangeWatch {
  const local = deps.changeWatchers.get(topic) ?? new Set();
  deps.changeWatchers.set(topic, local.add(onChange));
  const feed = feedOf(deps);
  let subscribed = feed.subscribed.get(topic);
  if (!subscribed) {
    subscribed = feed.sub.subscribe(channel(deps.config.REDIS_PREFIX, topic)).then(
      () => undefined,
      (err) => {
        feed.subscribed.delete(topic); // the next watcher of the topic tries again
        throw err;
      },
    );
    feed.subscribed.set(topic, subscribed);
  }
  const ready = subscribed.then(() => {
    if (local.has(onChange)) onChange();
  });
  ready.catch((err) => deps.logger.warn({ err: (err as Error).message, topic }, 'change subscription failed'));
  return {
    ready,
    close: async () => {
      local.delete(onChange);
    },
  };
}

import type { Deps } from '../deps.js';
import { createRedis, watchConnection } from '../redis.js';

/**
 * Connection changes announced to every process: the inbound receiver and worker keep a
 * connection (with its decrypted secrets) in memory, and a disabled, deleted or re-keyed
 * connection must take effect everywhere at once, not when a cache entry happens to expire.
 */
const channel = (prefix: string) => `${prefix}:connections:changed`;

/**
 * Tells every process that a connection changed. Called after the change committed; a lost
 * announcement (Redis down) only leaves other processes on the old connection until their
 * cache entries expire (INBOUND_LOOKUP_CACHE_MS), so it is logged rather than failing a
 * change that is already made.
 */
export async function announceConnectionChange(deps: Deps, connectionId: string): Promise<void> {
  try {
    await deps.redis.publish(channel(deps.config.REDIS_PREFIX), connectionId);
  } catch (err) {
    deps.logger.warn({ err: (err as Error).message, connectionId }, 'connection change not announced; other processes pick it up within INBOUND_LOOKUP_CACHE_MS');
  }
}

/**
 * Calls `onChange` for every announced change, once subscribed (what was cached before may
 * predate a change), and on every reconnection of the subscriber, since announcements made
 * while it was disconnected are gone. Resolves once subscribed.
 */
export function watchConnectionChanges(deps: Deps, onChange: (connectionId?: string) => void): Promise<void> {
  const sub = watchConnection(createRedis(deps.config.REDIS_URL, 'blocking'), 'connection-changes', deps.logger);
  sub.on('message', (_channel: string, id: string) => onChange(id));
  sub.on('ready', () => onChange());
  deps.closers.push(() => sub.quit().catch(() => sub.disconnect()));
  const subscribed = sub.subscribe(channel(deps.config.REDIS_PREFIX)).then(() => onChange());
  subscribed.catch((err) => deps.logger.warn({ err: (err as Error).message }, 'connection-change subscription failed'));
  return subscribed;
}

import type { RedisTarget } from '../config.js';
import type { ConnectionObserver } from '../connection-watch.js';
import { createRedis, watchConnection, type Redis } from '../redis.js';
import { wakePattern } from './wake.js';

/** `seq` is the highest position the waking commit wrote, when the message carried one. */
export type WakeListener = (appId: string, seq?: number) => void;

/**
 * One Redis subscriber per web process for every application's wakes, fanned out in memory
 * to whoever listens for an application (stream tails, commit waiters).
 */
export interface WakeHub {
  on(appId: string, listener: WakeListener): () => void;
  /** Resolves once the subscription is active. */
  ready: Promise<void>;
  close(): Promise<void>;
}

export function createWakeHub(redis: RedisTarget, redisPrefix: string, observer: ConnectionObserver): WakeHub {
  const { logger } = observer;
  const sub: Redis = watchConnection(createRedis(redis, 'blocking'), 'wakes', observer);
  const listeners = new Map<string, Set<WakeListener>>();
  const prefixLen = wakePattern(redisPrefix).length - 1;
  sub.on('pmessage', (_pattern: string, channel: string, message: string) => {
    const appId = channel.slice(prefixLen);
    const seq = /^\d{1,15}$/.test(message) ? Number(message) : undefined;
    for (const l of listeners.get(appId) ?? []) {
      try {
        l(appId, seq);
      } catch (err) {
        logger.error({ err }, 'wake listener failed');
      }
    }
  });
  const ready = sub.psubscribe(wakePattern(redisPrefix)).then(() => undefined);
  ready.catch((err) => logger.warn({ err }, 'wake subscribe failed'));
  return {
    ready,
    on(appId, listener) {
      let set = listeners.get(appId);
      if (!set) listeners.set(appId, (set = new Set()));
      set.add(listener);
      return () => {
        set!.delete(listener);
        if (set!.size === 0) listeners.delete(appId);
      };
    },
    async close() {
      listeners.clear();
      await sub.quit().catch(() => sub.disconnect());
    },
  };
}

import type { RedisTarget } from '../config.js';
import type { ConnectionObserver } from '../connection-watch.js';
import { createSubscriber } from '../pubsub.js';
import { type WakeChannels, wakePattern } from './wake.js';

/** `seq` is the highest position the waking commit wrote, when the message carried one. */
export type WakeListener = (appId: string, seq?: number) => void;

/**
 * One Redis subscriber per web process for every application's wakes, fanned out in memory
 * to whoever listens for an application (stream tails, commit waiters).
 */
export interface WakeHub {
  on(appId: string, listener: WakeListener): () => void;
  /**
   * Resolves once wakes of `appId` reach this process (call after `on`): classic, once the
   * process's one pattern subscription is active; sharded, once the application's channel is.
   */
  subscribed(appId: string): Promise<void>;
  /** Resolves once the subscriber is set up (classic: the pattern subscription is active). */
  ready: Promise<void>;
  close(): Promise<void>;
}

/**
 * Classic: one pattern subscription (`<prefix>:wake:*`) hears every application. Sharded pub/sub
 * has no patterns: the hub subscribes an application's channel when its first listener comes
 * and leaves it when its last goes, so each process hears only the applications it serves and
 * only from their shards.
 */
export function createWakeHub(redis: RedisTarget, channels: WakeChannels, observer: ConnectionObserver): WakeHub {
  const { logger } = observer;
  const sub = createSubscriber(redis, channels, 'wakes', observer);
  const listeners = new Map<string, Set<WakeListener>>();
  const deliver = (appId: string, message: string) => {
    const seq = /^\d{1,15}$/.test(message) ? Number(message) : undefined;
    for (const l of listeners.get(appId) ?? []) {
      try {
        l(appId, seq);
      } catch (err) {
        logger.error({ err }, 'wake listener failed');
      }
    }
  };

  /** Sharded: the subscription of each application with listeners (its channel's SSUBSCRIBE). */
  const channelSubs = new Map<string, Promise<void>>();
  const appOfChannel = new Map<string, string>();
  let ready: Promise<void>;
  if (channels.sharded) {
    sub.onMessage((channel, message) => {
      const appId = appOfChannel.get(channel);
      if (appId !== undefined) deliver(appId, message);
    });
    ready = Promise.resolve();
  } else {
    const prefixLen = wakePattern(channels.redisPrefix).length - 1;
    sub.connection.on('pmessage', (_pattern: string, channel: string, message: string) => deliver(channel.slice(prefixLen), message));
    ready = sub.connection.psubscribe(wakePattern(channels.redisPrefix)).then(() => undefined);
    ready.catch((err) => logger.warn({ err }, 'wake subscribe failed'));
  }

  const join = (appId: string) => {
    const channel = channels.of(appId);
    appOfChannel.set(channel, appId);
    // A failed subscription leaves the application to the listeners' periodic re-checks.
    const subscribing = sub.subscribe(channel).catch((err) => logger.warn({ err, appId }, 'wake subscribe failed'));
    channelSubs.set(appId, subscribing);
  };
  const leave = (appId: string) => {
    channelSubs.delete(appId);
    const channel = channels.of(appId);
    appOfChannel.delete(channel);
    sub.unsubscribe(channel).catch((err) => logger.warn({ err, appId }, 'wake unsubscribe failed'));
  };

  return {
    ready,
    subscribed: (appId) => (channels.sharded ? (channelSubs.get(appId) ?? Promise.resolve()) : ready),
    on(appId, listener) {
      let set = listeners.get(appId);
      if (!set) {
        listeners.set(appId, (set = new Set()));
        if (channels.sharded) join(appId);
      }
      set.add(listener);
      return () => {
        set!.delete(listener);
        if (set!.size > 0 || listeners.get(appId) !== set) return;
        listeners.delete(appId);
        if (channels.sharded) leave(appId);
      };
    },
    async close() {
      listeners.clear();
      await sub.close();
    },
  };
}

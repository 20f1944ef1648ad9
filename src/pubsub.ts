import { Cluster } from 'ioredis';
import type { RedisTarget } from './config.js';
import type { ConnectionObserver } from './connection-watch.js';
import { createRedis, execReplies, watchConnection, type Redis } from './redis.js';

/**
 * Classic or sharded pub/sub for the ledger's wakes and commit reports (REDIS_SHARDED_PUBSUB).
 *
 * Classic PUBLISH on a Redis Cluster is copied over the cluster bus to every node, whoever
 * listens: each wake costs traffic on every node, growing with the cluster. SPUBLISH (Redis 7)
 * goes only to the nodes of the channel's slot (its master and that master's replicas), and
 * SSUBSCRIBE listens on that shard: one connection per shard with listeners, opened by the
 * cluster client (`shardedSubscribers`). Sharded channels have no patterns, so a process
 * subscribes one channel per application it has listeners for, and leaves it when the last
 * listener goes.
 *
 * Both are fire-and-forget: a message published while a subscriber reconnects, or while its
 * slot moves to another node, is gone. Every listener re-checks PostgreSQL periodically for
 * exactly that reason; the message only makes the answer prompt.
 */
export interface PubSubMode {
  sharded: boolean;
}

/**
 * A sharded channel's name: its `tag` (an application id, a web process's reply id) in braces
 * at the front, so the channel hashes to that id's slot whatever hash tag REDIS_PREFIX holds
 * (a tag inside the prefix would put every channel of the deployment on one shard). Only the
 * first `{…}` of a name counts, so the prefix's own braces after it do not matter.
 */
export const shardedChannel = (tag: string, redisPrefix: string, kind: string) => `{${tag}}:${redisPrefix}:${kind}`;

/** One message to publish: [channel, message]. */
export type Outgoing = [channel: string, message: string];

/**
 * Publishes `messages`, each on its channel. Classic, or sharded on one server: one pipeline.
 * Sharded on a cluster: one SPUBLISH per channel, sent at once, each to its slot's master
 * (a cluster pipeline must stay within one slot, and these channels are spread on purpose).
 */
export async function publishAll(redis: Redis, mode: PubSubMode, messages: Outgoing[]): Promise<void> {
  if (messages.length === 0) return;
  if (mode.sharded && redis instanceof Cluster) {
    await Promise.all(messages.map(([channel, message]) => redis.spublish(channel, message)));
    return;
  }
  const pipeline = redis.pipeline();
  for (const [channel, message] of messages) {
    if (mode.sharded) pipeline.spublish(channel, message);
    else pipeline.publish(channel, message);
  }
  // A failed PUBLISH rejects, as on a cluster: the caller retries rather than counting on a wake that never went.
  await execReplies(pipeline);
}

/** A subscriber connection that speaks one mode: `subscribe` is SUBSCRIBE or SSUBSCRIBE, `onMessage` hears either. */
export interface Subscriber {
  connection: Redis;
  subscribe(channel: string): Promise<void>;
  unsubscribe(channel: string): Promise<void>;
  onMessage(listener: (channel: string, message: string) => void): void;
  close(): Promise<void>;
}

/**
 * How often a sharded subscriber on a cluster re-reads the slot map (ms). When a channel's slot
 * moves (a failover, a resharding) its old node drops the subscription, and a subscriber, which
 * sends no commands, would never hear of it from a MOVED: the client learns the new owner at
 * the next re-read and subscribes there again (ioredis does not re-read on its own). Until
 * then the listeners' periodic re-checks stand in; a re-read is one CLUSTER SLOTS.
 */
const SUBSCRIBER_SLOTS_REFRESH_MS = 2_000;

/** A subscriber connection (retrying forever, like every blocking connection) named `name` in outage reports. */
export function createSubscriber(target: RedisTarget, mode: PubSubMode, name: string, observer: ConnectionObserver): Subscriber {
  const cluster = mode.sharded ? { shardedSubscribers: true, slotsRefreshInterval: SUBSCRIBER_SLOTS_REFRESH_MS } : {};
  const connection = watchConnection(createRedis(target, 'blocking', {}, cluster), name, observer);
  return {
    connection,
    subscribe: async (channel) => {
      await (mode.sharded ? connection.ssubscribe(channel) : connection.subscribe(channel));
    },
    unsubscribe: async (channel) => {
      await (mode.sharded ? connection.sunsubscribe(channel) : connection.unsubscribe(channel));
    },
    onMessage: (listener) => void connection.on(mode.sharded ? 'smessage' : 'message', listener),
    close: () =>
      connection.quit().then(
        () => undefined,
        () => connection.disconnect(),
      ),
  };
}

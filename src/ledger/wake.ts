import type { Config } from '../config.js';
import { type Outgoing, type PubSubMode, publishAll, shardedChannel } from '../pubsub.js';
import type { Redis } from '../redis.js';
import type { CommittedEvent } from './write.js';

/**
 * Wakes are hints, never the truth: a reader that gets one re-reads the ledger by cursor.
 * One channel per application; the message is the highest committed seq.
 */
export interface WakeChannels extends PubSubMode {
  redisPrefix: string;
  /** The application's channel: `<prefix>:wake:<app>` classic, `{<app>}:<prefix>:wake` sharded (src/pubsub.ts). */
  of(appId: string): string;
}

export const wakeChannels = (config: Pick<Config, 'REDIS_PREFIX' | 'REDIS_SHARDED_PUBSUB'>): WakeChannels => {
  const redisPrefix = config.REDIS_PREFIX;
  const sharded = config.REDIS_SHARDED_PUBSUB;
  return {
    redisPrefix,
    sharded,
    of: (appId) => (sharded ? shardedChannel(appId, redisPrefix, 'wake') : `${redisPrefix}:wake:${appId}`),
  };
};

/** Classic mode's one pattern for every application's wakes. */
export const wakePattern = (redisPrefix: string) => `${redisPrefix}:wake:*`;

/** Adds one wake per application touched by a commit to `out`. */
export function addWakes(out: Outgoing[], channels: WakeChannels, committed: CommittedEvent[]): void {
  const top = new Map<string, number>();
  for (const e of committed) top.set(e.app_id, Math.max(top.get(e.app_id) ?? 0, e.seq));
  for (const [appId, seq] of top) out.push([channels.of(appId), String(seq)]);
}

/** One wake per application touched by a commit. */
export async function publishWakes(redis: Redis, channels: WakeChannels, committed: CommittedEvent[]): Promise<void> {
  const out: Outgoing[] = [];
  addWakes(out, channels, committed);
  await publishAll(redis, channels, out);
}

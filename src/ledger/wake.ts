import type { ChainableCommander } from 'ioredis';
import type { Redis } from '../redis.js';
import type { CommittedEvent } from './write.js';

/**
 * Wakes are hints, never the truth: a reader that gets one re-reads the ledger by cursor.
 * One channel per application; the message is the highest committed seq.
 */
const wakeChannel = (redisPrefix: string, appId: string) => `${redisPrefix}:wake:${appId}`;
export const wakePattern = (redisPrefix: string) => `${redisPrefix}:wake:*`;

/** Adds one publish per application touched by a commit to `pipeline`. */
export function addWakes(pipeline: ChainableCommander, redisPrefix: string, committed: CommittedEvent[]): void {
  const top = new Map<string, number>();
  for (const e of committed) top.set(e.app_id, Math.max(top.get(e.app_id) ?? 0, e.seq));
  for (const [appId, seq] of top) pipeline.publish(wakeChannel(redisPrefix, appId), String(seq));
}

/** One publish per application touched by a commit. */
export async function publishWakes(redis: Redis, redisPrefix: string, committed: CommittedEvent[]): Promise<void> {
  if (committed.length === 0) return;
  const pipeline = redis.pipeline();
  addWakes(pipeline, redisPrefix, committed);
  await pipeline.exec();
}

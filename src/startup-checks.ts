import type { Logger } from './logger.js';
import type { Redis } from './redis.js';

/**
 * The durability promise rests on Redis never evicting queue keys and, in production, on
 * Redis persisting them. Both are checked at start-up; eviction is an error (BullMQ loses
 * jobs under it), missing persistence a loud warning (a Redis restart would drop queued work).
 */
export async function checkRedis(redis: Redis, logger: Logger): Promise<{ evictionSafe: boolean; persistent: boolean } | undefined> {
  try {
    const [, policy] = (await redis.config('GET', 'maxmemory-policy')) as string[];
    const [, appendonly] = (await redis.config('GET', 'appendonly')) as string[];
    const [, save] = (await redis.config('GET', 'save')) as string[];
    const evictionSafe = policy === 'noeviction';
    const persistent = appendonly === 'yes' || (save ?? '').trim() !== '';
    if (!evictionSafe) {
      logger.error({ maxmemoryPolicy: policy }, `Redis maxmemory-policy is "${policy}": set it to noeviction, or queued jobs can be evicted and lost`);
    }
    if (!persistent) {
      logger.warn('Redis has no persistence (appendonly no, no save points): a Redis restart loses queued jobs. Use appendonly yes in production');
    }
    return { evictionSafe, persistent };
  } catch (err) {
    logger.warn({ err: (err as Error).message }, 'could not read the Redis configuration to verify maxmemory-policy and persistence');
    return undefined;
  }
}

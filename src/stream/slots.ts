import { randomUUID } from 'node:crypto';
import type { Logger } from '../logger.js';
import type { Redis } from '../redis.js';

// Leases are scored with Redis's own clock, so processes on hosts with skewed clocks agree.
const NOW = `local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

/** KEYS[1] slot set; ARGV: max, leaseMs, member. Drops expired leases, then takes one if any is free. */
const ACQUIRE = `${NOW}
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
return 1`;

/** KEYS[1] slot set; ARGV: leaseMs, members…. Extends leases still held (XX: a released one stays released). */
const RENEW = `${NOW}
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 2)
return 1`;

export interface StreamSlot {
  /** Gives the slot back; idempotent. */
  release(): void;
}

export interface StreamSlots {
  /** Takes one of the application's stream slots, or answers null when all are in use. */
  acquire(appId: string): Promise<StreamSlot | null>;
  /** Slots this process holds (for tests and metrics). */
  held(): number;
  close(): Promise<void>;
}

export interface SlotOptions {
  max: number;
  /** How long a slot outlives its last renewal: the time a dead process's slots take to come back (ms). */
  leaseMs: number;
}

/**
 * The per-application cap on concurrent streams, shared by every web process: one sorted set
 * per application in Redis whose members are leases scored by expiry. A process renews the
 * leases of its open streams every third of a lease and removes them on disconnect; a process
 * that dies stops renewing, so its slots lapse and are reclaimed by the next acquire.
 */
export function createStreamSlots(redis: Redis, redisPrefix: string, logger: Logger, options: SlotOptions): StreamSlots {
  const processId = randomUUID();
  const key = (appId: string) => `${redisPrefix}:stream:slots:${appId}`;
  const mine = new Map<string, Set<string>>();
  let count = 0;

  const renew = async () => {
    const pipeline = redis.pipeline();
    for (const [appId, members] of mine) {
      if (members.size) pipeline.eval(RENEW, 1, key(appId), options.leaseMs, ...members);
    }
    if (pipeline.length) await pipeline.exec();
  };
  const timer = setInterval(
    () => {
      renew().catch((err) => logger.warn({ err }, 'stream slot renewal failed'));
    },
    Math.max(100, Math.floor(options.leaseMs / 3)),
  );
  timer.unref();

  return {
    async acquire(appId) {
      const member = `${processId}:${randomUUID()}`;
      const got = await redis.eval(ACQUIRE, 1, key(appId), options.max, options.leaseMs, member);
      if (got !== 1) return null;
      let set = mine.get(appId);
      if (!set) mine.set(appId, (set = new Set()));
      set.add(member);
      count++;
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          count--;
          set!.delete(member);
          if (set!.size === 0 && mine.get(appId) === set) mine.delete(appId);
          redis.zrem(key(appId), member).catch((err) => logger.warn({ err }, 'stream slot release failed; its lease will lapse'));
        },
      };
    },
    held: () => count,
    async close() {
      clearInterval(timer);
    },
  };
}

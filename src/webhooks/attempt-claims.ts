import { randomUUID } from 'node:crypto';
import type { Redis } from '../redis.js';

/** Deletes a claim only while it is still this process's: one that lapsed may be another's now. */
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

/**
 * Which worker process is making an attempt of a delivery, shared by every process through
 * Redis. BullMQ hands a job out again when its lock lapses while its worker is alive but
 * held (a long pause, a starved machine); the process that takes it must not send what the
 * first is still sending. Within one process the deliverer knows that by itself; across
 * processes, the sender claims `(delivery, attempt)` for `ttlMs` just before it sends and
 * releases it once the outcome is written. A claim lapses by itself when its holder died, so
 * a lost process delays its attempts by at most `ttlMs`, never strands them. A claim lost
 * with a Redis failover can at worst repeat a send: deliveries stay at least once.
 */
export interface AttemptClaims {
  /** 0 when this process now holds the claim; otherwise how long (ms) another process's claim has left. */
  take(deliveryId: string, attempt: number): Promise<number>;
  /** How long (ms) the claim has left, 0 when nobody holds it. */
  left(deliveryId: string, attempt: number): Promise<number>;
  /** Releases this process's claim; a failure only leaves it to lapse. */
  release(deliveryId: string, attempt: number): void;
}

export function createAttemptClaims(
  redis: Redis,
  redisPrefix: string,
  ttlMs: number,
  onReleaseError: (err: unknown) => void,
): AttemptClaims {
  const token = randomUUID();
  const key = (deliveryId: string, attempt: number) => `${redisPrefix}:wh-attempting:${deliveryId}:${attempt}`;
  return {
    async take(deliveryId, attempt) {
      const k = key(deliveryId, attempt);
      const [[setErr, set], [ttlErr, ttl]] = (await redis.multi().set(k, token, 'PX', ttlMs, 'NX').pttl(k).exec()) as [
        [Error | null, string | null],
        [Error | null, number],
      ];
      if (setErr ?? ttlErr) throw setErr ?? ttlErr;
      // Another's claim that lapsed between the two commands: nobody's, worth another try at once.
      return set === 'OK' ? 0 : Math.max(ttl, 1);
    },
    async left(deliveryId, attempt) {
      return Math.max(await redis.pttl(key(deliveryId, attempt)), 0);
    },
    release(deliveryId, attempt) {
      redis.eval(RELEASE, 1, key(deliveryId, attempt), token).catch(onReleaseError);
    },
  };
}

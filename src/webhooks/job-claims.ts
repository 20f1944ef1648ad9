import { randomUUID } from 'node:crypto';
import { execReplies, type Redis } from '../redis.js';

/** Deletes a claim only while it is still this process's: one that lapsed may be another's now. */
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

/**
 * Which worker process runs a webhook job, shared by every process through Redis, beside
 * BullMQ's lock. BullMQ hands a job out again once its lock lapses, which happens to a worker
 * that is alive but held (a long pause, a machine starved of CPU) as well as to a dead one,
 * and the held one sends on when it resumes. A lock is renewed, so it lapses within seconds;
 * a claim is not, and lasts `ttlMs` — longer than any run of a live worker (its attempts'
 * timeout and the writes of their outcomes). A run that finds another's claim leaves the job
 * until the claim ends, and then finds the deliveries that run made written. A dead worker's
 * job thus waits out its claim; a claim lost with a Redis failover can at worst repeat a send
 * (deliveries stay at least once).
 */
export interface JobClaims {
  /** 0 when this process now holds the job's claim; otherwise how long (ms) another's has left. */
  take(job: ClaimedJob): Promise<number>;
  /** Releases this process's claim; should that fail, it lapses by itself. */
  release(job: ClaimedJob): void;
}

/** What names a job's claim: its queue's key prefix and its id. */
export interface ClaimedJob {
  queueQualifiedName: string;
  id?: string;
}

/**
 * The claim's key sits in its queue's key space, beside the job's own keys (BullMQ's are
 * `<queue>:<id>`, `<queue>:<id>:lock`, …): under queue shards it lands on its shard's slot,
 * so claims spread over a cluster's masters as the jobs do.
 */
const key = (job: ClaimedJob) => `${job.queueQualifiedName}:${job.id}:claim`;

export function createJobClaims(redis: Redis, ttlMs: number, onReleaseError: (err: unknown) => void): JobClaims {
  const token = randomUUID();
  return {
    async take(job) {
      const k = key(job);
      const [set, ttl] = (await execReplies(redis.multi().set(k, token, 'PX', ttlMs, 'NX').pttl(k))) as [string | null, number];
      // A claim that lapsed between the two commands reads -2: nobody's, worth a try at once.
      return set === 'OK' ? 0 : Math.max(ttl, 1);
    },
    release(job) {
      redis.eval(RELEASE, 1, key(job), token).catch(onReleaseError);
    },
  };
}

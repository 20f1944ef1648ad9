import type { Redis } from '../redis.js';

/**
 * One window's count for a key: adds `n`, starts the window's expiry on its first use, and
 * returns the count and the time left in the window.
 */
const COUNT_LUA = `
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
return {n, ttl}`;

const COMMAND = 'gatewayFloodCount';
type CountingPipeline = { [COMMAND](key: string, n: number, windowMs: number): void };

type Verdict = { ok: true } | { ok: false; retryAfterMs: number };

export interface FloodGuard {
  /** Counts one accepted delivery for `key`; refused past the limit of the current window. */
  consume(key: string): Promise<Verdict>;
}

interface Waiting {
  resolve(v: Verdict): void;
  reject(err: unknown): void;
}

/**
 * The per-connection flood guard (at most `perWindow` accepted deliveries per connection per
 * `windowMs`), counted in Redis so that every web process shares one count. Deliveries for
 * the same connection in one turn of the event loop are counted by one command, and all
 * connections' counts travel in one pipeline: a burst costs one round trip, not one each.
 */
export function createFloodGuard(redis: Redis, keyPrefix: string, perWindow: number, windowMs = 1000): FloodGuard {
  // A defined command travels as EVALSHA (the script is loaded once per connection).
  if (!(COMMAND in redis)) redis.defineCommand(COMMAND, { numberOfKeys: 1, lua: COUNT_LUA });
  let pending = new Map<string, Waiting[]>();
  const flush = () => {
    const batch = pending;
    pending = new Map();
    const pipeline = redis.pipeline();
    for (const [key, waiting] of batch) (pipeline as unknown as CountingPipeline)[COMMAND](`${keyPrefix}:${key}`, waiting.length, windowMs);
    pipeline.exec().then(
      (results) => {
        let i = 0;
        for (const waiting of batch.values()) {
          const [err, reply] = results![i++];
          if (err) {
            waiting.forEach((w) => w.reject(err));
            continue;
          }
          const [count, ttl] = reply as [number, number];
          // The batch took the numbers count-k+1 … count of this window, in arrival order.
          const first = count - waiting.length + 1;
          waiting.forEach((w, j) => w.resolve(first + j <= perWindow ? { ok: true } : { ok: false, retryAfterMs: ttl }));
        }
      },
      (err) => {
        for (const waiting of batch.values()) waiting.forEach((w) => w.reject(err));
      },
    );
  };
  return {
    consume(key) {
      return new Promise((resolve, reject) => {
        if (pending.size === 0) setImmediate(flush);
        const waiting = pending.get(key);
        if (waiting) waiting.push({ resolve, reject });
        else pending.set(key, [{ resolve, reject }]);
      });
    },
  };
}

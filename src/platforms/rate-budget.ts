import type { Redis } from '../redis.js';
import type { PlatformName } from './types.js';

/** One budget: at most `rate` sends per `perMs`, with `burst` extra sends allowed in a row. */
export interface Budget {
  rate: number;
  perMs: number;
  burst: number;
}

/**
 * Per-connection and per-recipient send budgets, from the platforms' documented limits
 * (PLATFORMS.md). Intervals carry a 3% margin so clock skew between our Redis and the
 * platform never tips a send over its limit.
 */
export const BUDGETS: Record<PlatformName, { connection: Budget; recipient: Budget }> = {
  TELEGRAM: { connection: { rate: 30, perMs: 1000, burst: 0 }, recipient: { rate: 1, perMs: 1000, burst: 0 } },
  WHATSAPP: { connection: { rate: 80, perMs: 1000, burst: 0 }, recipient: { rate: 1, perMs: 6000, burst: 3 } },
  MESSENGER: { connection: { rate: 40, perMs: 1000, burst: 0 }, recipient: { rate: 1, perMs: 1000, burst: 3 } },
  INSTAGRAM: { connection: { rate: 40, perMs: 1000, burst: 0 }, recipient: { rate: 1, perMs: 1000, burst: 3 } },
  SLACK: { connection: { rate: 50, perMs: 60_000, burst: 20 }, recipient: { rate: 1, perMs: 1000, burst: 3 } },
  DISCORD: { connection: { rate: 50, perMs: 1000, burst: 0 }, recipient: { rate: 5, perMs: 5000, burst: 0 } },
  SMS: { connection: { rate: 1, perMs: 1000, burst: 5 }, recipient: { rate: 1, perMs: 1000, burst: 3 } },
  EMAIL: { connection: { rate: 10, perMs: 1000, burst: 10 }, recipient: { rate: 5, perMs: 1000, burst: 5 } },
};

// GCRA over several keys at once: all budgets must allow the send, and only then are all
// charged, so a send refused by one budget never spends another's slot. Returns 0 when the
// send may go now, else the wait in ms. Time comes from Redis so every process agrees.
const SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = #KEYS
local wait = 0
local tats = {}
for i = 1, n do
  local interval = tonumber(ARGV[(i - 1) * 2 + 1])
  local tolerance = tonumber(ARGV[(i - 1) * 2 + 2])
  local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
  if tat < now then tat = now end
  local allowed_at = tat - tolerance
  if allowed_at > now and allowed_at - now > wait then wait = allowed_at - now end
  tats[i] = tat + interval
end
if wait > 0 then return wait end
for i = 1, n do
  local interval = tonumber(ARGV[(i - 1) * 2 + 1])
  local tolerance = tonumber(ARGV[(i - 1) * 2 + 2])
  redis.call('SET', KEYS[i], tats[i], 'PX', math.ceil(interval + tolerance) + 1000)
end
return 0
`;

const params = (b: Budget) => {
  const interval = Math.ceil((b.perMs / b.rate) * 1.03);
  return [interval, interval * b.burst];
};

/** Spends one send from each budget, or tells how long to wait (ms) without spending any. */
export async function takeSendBudget(
  redis: Redis,
  redisPrefix: string,
  platform: PlatformName,
  connectionId: string,
  recipient: string,
): Promise<number> {
  const b = BUDGETS[platform];
  // One hash tag per connection keeps both keys in one Redis Cluster slot for the script.
  const keys = [`${redisPrefix}:budget:{${connectionId}}`, `${redisPrefix}:budget:{${connectionId}}:${recipient}`];
  const result = await redis.eval(SCRIPT, keys.length, ...keys, ...params(b.connection), ...params(b.recipient));
  return Number(result);
}

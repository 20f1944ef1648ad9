import { execReplies, type Redis } from '../redis.js';
import { getAdapter } from './registry.js';
import type { Budget, PlatformName, RateBudget } from './types.js';

/** The operator's replacements of platforms' budgets (PLATFORM_RATE_BUDGETS). */
export type BudgetOverrides = Partial<Record<string, Partial<RateBudget>>>;

/** A platform's send budgets: its adapter's documented ones, each replaced where the operator says. */
const budgetOf = (platform: PlatformName, overrides: BudgetOverrides = {}): RateBudget => ({
  ...getAdapter(platform).rateBudget,
  ...overrides[platform],
});

// Every script reads the time from Redis, so every process agrees on it.
const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

// GCRA with reservation over KEYS[first..last] (ARGV: interval and tolerance of each key, in
// order). The send is placed at the earliest time every budget allows (`slot`), and every
// budget is charged for that time at once, so jobs over budget are each delayed exactly once
// to their own slot instead of all waking at the next free one and racing for it. Returns the
// wait in ms (0 = send now).
const RESERVE_FN = `
local function reserve(first, last)
  local slot = now
  local tats = {}
  for i = first, last do
    local tolerance = tonumber(ARGV[(i - 1) * 2 + 2])
    local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
    if tat < now then tat = now end
    tats[i] = tat
    if tat - tolerance > slot then slot = tat - tolerance end
  end
  for i = first, last do
    local interval = tonumber(ARGV[(i - 1) * 2 + 1])
    local tolerance = tonumber(ARGV[(i - 1) * 2 + 2])
    local tat = tats[i]
    if tat < slot then tat = slot end
    tat = tat + interval
    redis.call('SET', KEYS[i], tat, 'PX', math.ceil(tat - now + tolerance) + 1000)
  end
  return slot - now
end
`;

// GCRA without reservation over KEYS[first..last], on the moment a send actually goes out: all
// budgets must allow it now, and only then are all charged; otherwise the wait in ms, with
// nothing charged. Reservations place jobs; this keeps the sends themselves spaced when jobs
// start late together (BullMQ wakes delayed jobs on Redis's ~100 ms blocking-timeout tick,
// and busy workers start them late).
const PACE_FN = `
local function pace(first, last)
  local wait = 0
  local tats = {}
  for i = first, last do
    local interval = tonumber(ARGV[(i - 1) * 2 + 1])
    local tolerance = tonumber(ARGV[(i - 1) * 2 + 2])
    local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
    if tat < now then tat = now end
    if tat - tolerance - now > wait then wait = tat - tolerance - now end
    tats[i] = tat + interval
  end
  if wait > 0 then return wait end
  for i = first, last do
    local interval = tonumber(ARGV[(i - 1) * 2 + 1])
    local tolerance = tonumber(ARGV[(i - 1) * 2 + 2])
    redis.call('SET', KEYS[i], tats[i], 'PX', math.ceil(interval + tolerance) + 1000)
  end
  return 0
end
`;

const RESERVE = `${NOW}${RESERVE_FN}return reserve(1, #KEYS)`;
const PACE = `${NOW}${PACE_FN}return pace(1, #KEYS)`;

// A platform asked us to wait: nothing more goes out on the key until `now + wait`.
const HOLD = `${NOW}
local until_ = now + tonumber(ARGV[1]) + tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if until_ > tat then redis.call('SET', KEYS[1], until_, 'PX', math.ceil(until_ - now) + 1000) end
return 0
`;

// The batch send's admission, RESERVE and PACE of one send in one script: the reservation is
// made as RESERVE makes it (the send's slot, every budget charged for it); if the slot is now,
// pacing is tried as PACE tries it and, if it allows, charged too. Returns {wait, paced}: paced
// 1 means the send may go at once; otherwise its slot stands and it may go after `wait` ms
// (once pacing allows). KEYS: budget connection, budget recipient, pace connection, pace
// recipient (one hash tag: one Cluster slot). ARGV: interval and tolerance of each key, in order.
const RESERVE_AND_PACE = `${NOW}${RESERVE_FN}${PACE_FN}
local wait = reserve(1, 2)
if wait > 0 then return {wait, 0} end
wait = pace(3, 4)
if wait > 0 then return {wait, 0} end
return {0, 1}
`;

/**
 * A platform's budgets (its adapter's `rateBudget`) as GCRA interval and tolerance. Intervals
 * carry a 3% margin so clock skew between our Redis and the platform never tips a send over
 * its limit.
 */
const params = (b: Budget) => {
  const interval = Math.ceil((b.perMs / b.rate) * 1.03);
  return [interval, interval * b.burst];
};

// One hash tag per connection keeps all its keys in one Redis Cluster slot for the scripts.
const connectionKey = (prefix: string, connectionId: string) => `${prefix}:budget:{${connectionId}}`;
const recipientKey = (prefix: string, connectionId: string, recipient: string) => `${prefix}:budget:{${connectionId}}:${recipient}`;

/**
 * Reserves the earliest moment one send fits both the connection's and the recipient's
 * budget, charges both for it, and returns how long to wait for it (ms; 0 = now).
 */
export async function reserveSendSlot(
  redis: Redis,
  redisPrefix: string,
  platform: PlatformName,
  connectionId: string,
  recipient: string,
  overrides?: BudgetOverrides,
): Promise<number> {
  const b = budgetOf(platform, overrides);
  const keys = [connectionKey(redisPrefix, connectionId), recipientKey(redisPrefix, connectionId, recipient)];
  const result = await redis.eval(RESERVE, keys.length, ...keys, ...params(b.connection), ...params(b.recipient));
  return Number(result);
}

const paceKeys = (prefix: string, connectionId: string, recipient: string) => [
  `${prefix}:pace:{${connectionId}}`,
  `${prefix}:pace:{${connectionId}}:${recipient}`,
];

/**
 * Pacing allows up to one interval (at most 50 ms) of catch-up beyond the budget's burst: a
 * send that starts a little late does not push every later send back with it, which would
 * otherwise lose that much of the allowed rate for good.
 */
const paceParams = (b: Budget) => {
  const [interval, tolerance] = params(b);
  return [interval, tolerance + Math.min(interval, 50)];
};

/**
 * Spends one send from the connection's and the recipient's budget at this moment, or says
 * how long until it may go (ms) without spending anything.
 */
export async function paceSend(
  redis: Redis,
  redisPrefix: string,
  platform: PlatformName,
  connectionId: string,
  recipient: string,
  overrides?: BudgetOverrides,
): Promise<number> {
  const b = budgetOf(platform, overrides);
  const keys = paceKeys(redisPrefix, connectionId, recipient);
  return Number(await redis.eval(PACE, keys.length, ...keys, ...paceParams(b.connection), ...paceParams(b.recipient)));
}

type AdmitPipeline = ReturnType<Redis['pipeline']> & {
  gwReserveAndPace(k1: string, k2: string, k3: string, k4: string, ...args: number[]): AdmitPipeline;
};

/** The script runs by EVALSHA (ioredis loads it on a NOSCRIPT answer): one short command per send. */
function defineAdmit(redis: Redis): void {
  if (!('gwReserveAndPace' in redis)) redis.defineCommand('gwReserveAndPace', { numberOfKeys: 4, lua: RESERVE_AND_PACE });
}

/** A send's admission: go now (paced), or its reserved slot is `waitMs` away. */
export interface Admission {
  waitMs: number;
  /** Reserved and paced: it may go at once. */
  paced: boolean;
}

/**
 * Reserves each send's slot in the connection's and the recipient's budgets (as
 * `reserveSendSlot`, in the order given) and, for a slot that is now, paces it (as `paceSend`).
 * The scripts go out in one pipeline: one write and one round trip for the batch.
 */
export async function admitSends(
  redis: Redis,
  redisPrefix: string,
  sends: { platform: PlatformName; connectionId: string; recipient: string }[],
  overrides?: BudgetOverrides,
): Promise<Admission[]> {
  defineAdmit(redis);
  const pipeline = redis.pipeline() as AdmitPipeline;
  for (const { platform, connectionId, recipient } of sends) {
    const b = budgetOf(platform, overrides);
    const [pc, pr] = paceKeys(redisPrefix, connectionId, recipient);
    pipeline.gwReserveAndPace(
      connectionKey(redisPrefix, connectionId),
      recipientKey(redisPrefix, connectionId, recipient),
      pc,
      pr,
      ...params(b.connection),
      ...params(b.recipient),
      ...paceParams(b.connection),
      ...paceParams(b.recipient),
    );
  }
  return (await execReplies(pipeline)).map((reply) => {
    const [wait, paced] = reply as [number, number];
    return { waitMs: Number(wait), paced: Number(paced) === 1 };
  });
}

/** After a platform's retry-after: later reservations on the connection start after `waitMs`. */
export async function holdConnection(
  redis: Redis,
  redisPrefix: string,
  platform: PlatformName,
  connectionId: string,
  waitMs: number,
  overrides?: BudgetOverrides,
): Promise<void> {
  const b = budgetOf(platform, overrides).connection;
  await redis.eval(HOLD, 1, connectionKey(redisPrefix, connectionId), Math.ceil(waitMs), params(b)[1]);
  await redis.eval(HOLD, 1, paceKeys(redisPrefix, connectionId, '')[0], Math.ceil(waitMs), paceParams(b)[1]);
}

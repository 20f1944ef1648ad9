import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWindowLimiter } from '../../src/rate-limit.js';
import type { Redis } from 'ioredis';
import { createRedis } from '../../src/redis.js';
import { ItemFailed, tickBatch } from '../../src/tick-batch.js';
import { SHARED_REDIS_URL } from '../helpers/servers.js';

describe('tickBatch', () => {
  it("hands one turn's calls to run together and answers each caller with its own output", async () => {
    const batches: number[][] = [];
    const double = tickBatch<number, number>(
      async (items) => {
        batches.push(items);
        return items.map((i) => (i === 3 ? new ItemFailed(new Error('three')) : i * 2));
      },
      { maxBatch: 100 },
    );
    const results = await Promise.allSettled([1, 2, 3, 4].map(double));
    expect(batches).toEqual([[1, 2, 3, 4]]);
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as Error).message))).toEqual([2, 4, 'three', 8]);
  });

  it('splits a burst at maxBatch and fails every caller of a batch whose run throws', async () => {
    const batches: string[][] = [];
    const run = tickBatch<string, string>(
      async (items) => {
        batches.push(items);
        if (items.includes('bad')) throw new Error('batch failed');
        return items;
      },
      { maxBatch: 2 },
    );
    const results = await Promise.allSettled(['a', 'b', 'c', 'bad'].map(run));
    expect(batches).toEqual([
      ['a', 'b'],
      ['c', 'bad'],
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'rejected']);
  });

  it('serial: calls made while a batch runs wait for it and go together in the next', async () => {
    const batches: number[][] = [];
    let release!: () => void;
    const firstRunning = new Promise<void>((r) => (release = r));
    let started!: () => void;
    const firstStarted = new Promise<void>((r) => (started = r));
    const run = tickBatch<number, void>(
      async (items) => {
        batches.push(items);
        if (batches.length === 1) {
          started();
          await firstRunning;
        }
        return items.map(() => undefined);
      },
      { maxBatch: 100, serial: true },
    );
    const first = run(1);
    await firstStarted;
    const later = [run(2), run(3)];
    await new Promise((r) => setImmediate(r));
    expect(batches).toEqual([[1]]);
    release();
    await Promise.all([first, ...later]);
    expect(batches).toEqual([[1], [2, 3]]);
  });
});

describe('tickBatch poison isolation', () => {
  /** An error as postgres.js raises it when PostgreSQL refuses a statement's data. */
  const pgError = (code: string, message: string) => Object.assign(new Error(message), { name: 'PostgresError', code });

  it("bisects a batch failing on one item's data until only that item's caller fails, keeping arrival order", async () => {
    const runs: string[][] = [];
    const write = tickBatch<string, string>(
      async (items) => {
        runs.push(items);
        if (items.includes('poison')) throw pgError('22P05', 'unsupported Unicode escape sequence');
        return items.map((i) => i.toUpperCase());
      },
      { maxBatch: 100, serial: true },
    );
    const items = ['a', 'b', 'c', 'poison', 'd', 'e', 'f', 'g'];
    const results = await Promise.allSettled(items.map(write));
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as { code: string }).code))).toEqual([
      'A',
      'B',
      'C',
      '22P05',
      'D',
      'E',
      'F',
      'G',
    ]);
    // Every good item was written exactly once, in the order it arrived.
    expect(runs.filter((r) => !r.includes('poison')).flat()).toEqual(['a', 'b', 'c', 'd', 'e', 'f', 'g']);
    // Bisection, not item by item: the batch, its poisoned halves down to the item alone.
    expect(runs).toEqual([items, ['a', 'b', 'c', 'poison'], ['a', 'b'], ['c', 'poison'], ['c'], ['poison'], ['d', 'e', 'f', 'g']]);
  });

  it('isolates an item whose serialisation overflows the stack (a RangeError)', async () => {
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = { a: deep };
    const runs: number[] = [];
    const write = tickBatch<unknown, number>(
      async (items) => {
        runs.push(items.length);
        return items.map((i) => JSON.stringify(i).length);
      },
      { maxBatch: 100 },
    );
    const results = await Promise.allSettled([{ x: 1 }, deep, { y: 22 }].map(write));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(RangeError);
    expect(runs.length).toBeLessThanOrEqual(5);
  });

  it.each([
    ['a lost connection', Object.assign(new Error('write CONNECTION_CLOSED'), { code: 'CONNECTION_CLOSED' })],
    ['PostgreSQL shutting down', pgError('57P01', 'terminating connection due to administrator command')],
    ['a deadlock', pgError('40P01', 'deadlock detected')],
    ['an unknown fault', new Error('something else')],
    [
      'a buffer read out of range (a corrupted stream, not an item)',
      Object.assign(new RangeError('The value of "offset" is out of range.'), { code: 'ERR_OUT_OF_RANGE' }),
    ],
  ])('fails the whole batch at once on %s, without splitting it item by item', async (_what, error) => {
    let runs = 0;
    const write = tickBatch<number, number>(
      async () => {
        runs++;
        throw error;
      },
      { maxBatch: 100, serial: true },
    );
    const results = await Promise.allSettled([1, 2, 3, 4, 5, 6].map(write));
    expect(results.every((r) => r.status === 'rejected' && r.reason === error)).toBe(true);
    expect(runs).toBe(1);
  });

  it('fails every item of a batch whose items are all poison, each with its own error, in bounded runs', async () => {
    let runs = 0;
    const write = tickBatch<number, number>(
      async (items) => {
        runs++;
        if (items.length === 1) throw pgError('54001', `stack depth limit exceeded (item ${items[0]})`);
        throw pgError('54001', 'stack depth limit exceeded');
      },
      { maxBatch: 100 },
    );
    const results = await Promise.allSettled([1, 2, 3, 4].map(write));
    expect(results.map((r) => ((r as PromiseRejectedResult).reason as Error).message)).toEqual(
      [1, 2, 3, 4].map((i) => `stack depth limit exceeded (item ${i})`),
    );
    expect(runs).toBe(7); // 1 + 2 + 4: a full binary split, never more
  });
});

describe('createWindowLimiter (real Redis)', () => {
  let redis: Redis;
  const prefix = `test-wl-${randomBytes(4).toString('hex')}`;
  beforeAll(async () => {
    redis = createRedis(SHARED_REDIS_URL);
    await new Promise<void>((resolve) => (redis.status === 'ready' ? resolve() : redis.once('ready', () => resolve())));
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
  });

  it('refuses exactly the calls of a burst past the budget, in arrival order, and keeps counting across turns', async () => {
    const limiter = createWindowLimiter(redis, prefix, 4, 60);
    const burst = await Promise.all(Array.from({ length: 7 }, () => limiter.consume('app-a')));
    expect(burst.map((v) => v.allowed)).toEqual([true, true, true, true, false, false, false]);
    expect(burst.map((v) => v.remaining)).toEqual([3, 2, 1, 0, 0, 0, 0]);
    expect(burst.every((v) => v.resetMs > 0 && v.resetMs <= 60_000)).toBe(true);
    // Every call of the burst was counted, refused ones too (as rate-limiter-flexible counts them).
    expect(Number(await redis.get(`${prefix}:app-a`))).toBe(7);
    expect((await limiter.consume('app-a')).allowed).toBe(false);
  });

  it('counts each key on its own within one turn', async () => {
    const limiter = createWindowLimiter(redis, prefix, 2, 60);
    const verdicts = await Promise.all(['k1', 'k2', 'k1', 'k2', 'k1'].map((k) => limiter.consume(k)));
    expect(verdicts.map((v) => v.allowed)).toEqual([true, true, true, true, false]);
  });

  it('spends the several points of each call of a turn in the one command of a single point, all or nothing, in arrival order', async () => {
    const limiter = createWindowLimiter(redis, prefix, 10, 60);
    const monitor = await redis.monitor();
    const seen: string[][] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (args.some((a) => a.startsWith(`${prefix}:`))) seen.push(args);
    });
    // Redis shows commands in execution order: once the marker is seen, everything before it is.
    const settled = async (marker: string) => {
      const key = `${prefix}:${marker}`;
      const shown = new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`MONITOR did not show ${marker}`)), 5_000);
        const check = (_time: string, args: string[]) => {
          if (!args.includes(key)) return;
          clearTimeout(timer);
          monitor.off('monitor', check);
          resolve();
        };
        monitor.on('monitor', check);
      });
      await redis.get(key);
      await shown;
      const commands = seen.filter((args) => !args.includes(`${prefix}:${marker}`)).length;
      seen.length = 0;
      return commands;
    };
    await settled('start');
    await limiter.consume('single');
    const perCall = await settled('after-single');
    expect(perCall).toBeGreaterThan(0);

    const verdicts = await Promise.all([
      limiter.consume('multi', 4),
      limiter.consume('multi', 5),
      limiter.consume('multi', 3),
      limiter.consume('multi'),
    ]);
    expect(await settled('after-multi')).toBe(perCall);
    expect(verdicts.map((v) => v.allowed)).toEqual([true, true, false, false]);
    expect(verdicts.map((v) => v.remaining)).toEqual([6, 1, 0, 0]);
    expect(Number(await redis.get(`${prefix}:multi`))).toBe(13);
    monitor.disconnect();
  });

  it('lease: spends leased points without a round trip, and processes sharing a key never admit more than the budget together', async () => {
    const a = createWindowLimiter(redis, prefix, 10, 60, { lease: 3 });
    const b = createWindowLimiter(redis, prefix, 10, 60, { lease: 3 });
    const count = async () => Number(await redis.get(`${prefix}:shared`));
    expect((await a.consume('shared')).allowed).toBe(true);
    // One trip drew this call's point and three spare ones for the process.
    expect(await count()).toBe(4);
    for (let i = 0; i < 3; i++) expect((await a.consume('shared')).allowed).toBe(true);
    expect(await count()).toBe(4);
    // Both "processes" now race for the rest, one call at a time and in bursts.
    const verdicts = [];
    for (let i = 0; i < 6; i++) verdicts.push(await b.consume('shared'), await a.consume('shared'));
    verdicts.push(...(await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 ? a : b).consume('shared')))));
    const admitted = 4 + verdicts.filter((v) => v.allowed).length;
    expect(admitted).toBeLessThanOrEqual(10);
    // Spare points drawn but unspent only cost admissions: here none are left over at the end.
    expect(admitted).toBe(10);
  });
});

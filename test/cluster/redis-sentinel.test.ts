import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { startRedisSentinel, type RedisSentinelSet } from '../helpers/redis-sentinel.js';
import { createTestEnv, freePort, spawnService, startTestStack, type TestEnv, type TestStack } from '../helpers/stack.js';
import { until } from '../stream/helpers.js';

/**
 * Every connection through Redis Sentinel (REDIS_SENTINELS), with the master's password from
 * REDIS_URL: a real master, replica and sentinel started here; a SENTINEL FAILOVER is followed.
 */
const PASSWORD = 'sentinel-test-pw';
let set: RedisSentinelSet;
let s: TestStack;

beforeAll(async () => {
  set = await startRedisSentinel({ password: PASSWORD });
  s = await startTestStack({
    workers: ['ledger'],
    env: {
      REDIS_URL: `redis://:${PASSWORD}@127.0.0.1:1/0`,
      REDIS_SENTINELS: set.sentinels,
      REDIS_SENTINEL_NAME: set.name,
    },
  });
}, 120_000);
afterAll(async () => {
  await s?.close();
  await set?.destroy();
});

const createEvent = async (app: Awaited<ReturnType<TestStack['createApp']>>, n: number) =>
  s.request('POST', '/v1/events', { auth: app, body: { event_type: 'order.placed', payload: { n } } });

describe('Redis through Sentinel', () => {
  it('serves requests and workers through the master the sentinel names, and follows a failover', async () => {
    const app = await s.createApp();
    const first = await createEvent(app, 1);
    expect(first.status).toBe(201);
    expect(s.config.redis).toMatchObject({ sentinelName: set.name, auth: { password: PASSWORD } });

    const newMaster = await set.failover();
    expect(newMaster).toBe(set.replica.port);
    // Requests in the switch may be refused (503); the service then writes to the new master.
    let after: Awaited<ReturnType<typeof createEvent>> | undefined;
    await until(
      async () => {
        after = await createEvent(app, 2);
        return after.status === 201;
      },
      30_000,
      'a 201 after the failover',
    );
    expect([503, 201]).toContain(after!.status);
    const listed = await s.request('GET', '/v1/events', { auth: app });
    expect(listed.json.data.map((e: { payload: { n: number } }) => e.payload.n)).toEqual([1, 2]);
  }, 90_000);
});

describe('a Sentinel misconfiguration stops a web process at start with one line', () => {
  let t: TestEnv;
  beforeAll(async () => {
    t = await createTestEnv({ LOG_LEVEL: 'info' });
  });
  afterAll(async () => t?.dropDatabase());

  it.each([
    [
      'unreachable sentinels',
      async () => ({ REDIS_SENTINELS: `127.0.0.1:${await freePort()}`, REDIS_SENTINEL_NAME: 'gwmaster' }),
      /no sentinel of REDIS_SENTINELS answered/,
    ],
    [
      'an unknown master name',
      async () => ({ REDIS_SENTINELS: set.sentinels, REDIS_SENTINEL_NAME: 'nosuch' }),
      /monitors a master named \\?"nosuch/,
    ],
  ])(
    '%s',
    async (_name, env, line) => {
      const web = spawnService('src/web.ts', { ...t.env, ...(await env()), PORT: String(await freePort()) });
      expect(await web.exited).toBe(1);
      expect(web.output()).toMatch(line);
      expect(web.output()).not.toMatch(/\n\s+at /);
    },
    60_000,
  );

  it('REDIS_SENTINEL_NAME is required with REDIS_SENTINELS, and not both topologies at once', () => {
    expect(() => parseConfig({ REDIS_SENTINELS: '127.0.0.1:26379' })).toThrow(/REDIS_SENTINEL_NAME: required with REDIS_SENTINELS/);
    expect(() =>
      parseConfig({ REDIS_SENTINELS: 'a:1', REDIS_SENTINEL_NAME: 'm', REDIS_CLUSTER_NODES: 'b:2', REDIS_PREFIX: '{gw}' }),
    ).toThrow(/not both/);
    expect(parseConfig({ REDIS_URL: 'rediss://u:p%40ss@x:6379/2', REDIS_SENTINELS: 'a:1', REDIS_SENTINEL_NAME: 'm' }).redis).toEqual({
      sentinels: [{ host: 'a', port: 1 }],
      sentinelName: 'm',
      auth: { username: 'u', password: 'p@ss', tls: true, db: 2 },
    });
  });
});

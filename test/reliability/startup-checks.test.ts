import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { createRedis } from '../../src/redis.js';
import { checkRedis, inspectRedis, type RedisDurability } from '../../src/startup-checks.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { createTestEnv, spawnService } from '../helpers/stack.js';

const servers: RedisServer[] = [];
const server = async (o: Parameters<typeof startRedisServer>[0]) => {
  const r = await startRedisServer(o);
  servers.push(r);
  return r;
};
afterAll(async () => {
  for (const r of servers) await r.destroy();
});

function captureLogger() {
  const lines: { level: number; msg: string }[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}
const until = async (f: () => boolean, what: string) => {
  const deadline = Date.now() + 10_000;
  while (!f()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

describe('Redis start-up checks', () => {
  it('reads the eviction policy and persistence of the Redis it runs on', async () => {
    const lru = await server({ args: ['--maxmemory-policy', 'allkeys-lru'] });
    const durable = await server({ durable: true });
    const snapshots = await server({ args: ['--save', '60 1'] });
    const read = async (url: string) => {
      const c = createRedis(url);
      try {
        return await inspectRedis(c);
      } finally {
        c.disconnect();
      }
    };
    expect(await read(lru.url)).toMatchObject({
      maxmemoryPolicy: 'allkeys-lru',
      evictionSafe: false,
      persistent: false,
      appendonly: false,
    });
    expect(await read(durable.url)).toMatchObject({
      maxmemoryPolicy: 'noeviction',
      evictionSafe: true,
      persistent: true,
      appendonly: true,
    });
    expect(await read(snapshots.url)).toMatchObject({ evictionSafe: true, persistent: true, appendonly: false, savePoints: '60 1' });
  });

  it('refuses an evicting Redis, warns loudly about one without persistence, and checks again after a reconnect', async () => {
    const r = await server({});
    const { logger, lines } = captureLogger();
    const c = createRedis(r.url);
    const unsafe: RedisDurability[] = [];
    try {
      const d = await checkRedis(c, logger, { onUnsafe: (x) => unsafe.push(x) });
      expect(d).toMatchObject({ evictionSafe: true, persistent: false });
      expect(unsafe).toEqual([]);
      expect(lines.some((l) => l.level === 40 && /NO PERSISTENCE/.test(l.msg))).toBe(true);

      // Redis comes back from a restart with an evicting policy: the re-check says so.
      await r.stop();
      await r.start(['--maxmemory-policy', 'volatile-lru']);
      await until(
        () => lines.some((l) => l.level === 50 && /maxmemory-policy is "volatile-lru".*noeviction/.test(l.msg)),
        'the re-check to log the policy',
      );
    } finally {
      c.disconnect();
    }
  });

  it('stops the web and worker processes on an evicting Redis, naming the fix', async () => {
    const lru = await server({ args: ['--maxmemory-policy', 'allkeys-lru'] });
    const t = await createTestEnv({ REDIS_URL: lru.url, LOG_LEVEL: 'info', PORT: '0' });
    try {
      for (const entry of ['src/web.ts', 'workers/index.ts']) {
        const p = spawnService(entry, t.env);
        expect(await p.exited).toBe(1);
        expect(p.output()).toMatch(/maxmemory-policy is \\?"allkeys-lru\\?".*CONFIG SET maxmemory-policy noeviction/);
      }
    } finally {
      await t.dropDatabase();
    }
  });

  it('starts the web process on a Redis without persistence, with the warning in its log', async () => {
    const r = await server({});
    const t = await createTestEnv({ REDIS_URL: r.url, LOG_LEVEL: 'info', PORT: '0' });
    const p = spawnService('src/web.ts', t.env);
    try {
      await p.waitFor(/web listening/);
      expect(p.output()).toMatch(/NO PERSISTENCE/);
    } finally {
      p.kill('SIGTERM');
      await p.exited;
      await t.dropDatabase();
    }
  });
});

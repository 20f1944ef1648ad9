import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { startRedisServer, type RedisServer } from './redis-server.js';
import { freePort } from './stack.js';

export interface RedisSentinelSet {
  /** The master group's name the sentinel monitors (REDIS_SENTINEL_NAME). */
  name: string;
  /** `host:port` of the sentinel: a REDIS_SENTINELS value. */
  sentinels: string;
  master: RedisServer;
  replica: RedisServer;
  /** Where the sentinel says the master is now (a port). */
  masterPort(): Promise<number>;
  /** `SENTINEL FAILOVER`; resolves once the sentinel names the other server as master. */
  failover(): Promise<number>;
  destroy(): Promise<void>;
}

/**
 * One redis-server master, one replica of it and one redis-sentinel watching them, each a
 * private process on a free port, optionally all behind `password` (requirepass, masterauth,
 * the sentinel's auth-pass): what a Sentinel deployment runs, small enough for a test.
 */
export async function startRedisSentinel(options: { password?: string } = {}): Promise<RedisSentinelSet> {
  const name = 'gwmaster';
  const pw = options.password;
  const auth = pw ? ['--requirepass', pw, '--masterauth', pw] : [];
  const master = await startRedisServer({ args: auth });
  const replica = await startRedisServer({ args: [...auth, '--replicaof', '127.0.0.1', String(master.port)] });
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'gw-sentinel-'));
  const conf = join(dir, 'sentinel.conf');
  writeFileSync(
    conf,
    [
      `port ${port}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor ${name} 127.0.0.1 ${master.port} 1`,
      `sentinel down-after-milliseconds ${name} 1000`,
      `sentinel failover-timeout ${name} 10000`,
      ...(pw ? [`sentinel auth-pass ${name} ${pw}`] : []),
      '',
    ].join('\n'),
  );
  const proc: ChildProcess = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const admin = new Redis({ port, host: '127.0.0.1', retryStrategy: () => 50, maxRetriesPerRequest: null, lazyConnect: false });
  admin.on('error', () => {});
  const masterPort = async () => Number(((await admin.call('SENTINEL', 'get-master-addr-by-name', name)) as [string, string])[1]);
  const until = async (check: () => Promise<boolean>, what: string) => {
    const deadline = Date.now() + 30_000;
    while (!(await check().catch(() => false))) {
      if (Date.now() > deadline) throw new Error(`sentinel: ${what} within 30 s`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const destroy = async () => {
    admin.disconnect();
    proc.kill('SIGKILL');
    await exited;
    rmSync(dir, { recursive: true, force: true });
    await Promise.all([master.destroy(), replica.destroy()]);
  };
  try {
    // Ready once the sentinel has found the replica through the master (a failover needs one).
    await until(async () => ((await admin.call('SENTINEL', 'replicas', name)) as unknown[]).length > 0, 'the replica is known');
  } catch (err) {
    await destroy();
    throw err;
  }
  return {
    name,
    sentinels: `127.0.0.1:${port}`,
    master,
    replica,
    masterPort,
    async failover() {
      const before = await masterPort();
      // The replica must be in sync for the sentinel to pick it.
      await until(async () => {
        await admin.call('SENTINEL', 'failover', name);
        return true;
      }, 'SENTINEL FAILOVER accepted');
      await until(async () => (await masterPort()) !== before, 'a new master');
      return masterPort();
    },
    destroy,
  };
}

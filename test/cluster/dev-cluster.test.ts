import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { createRedis } from '../../src/redis.js';
import { spawnService, type ChildService } from '../helpers/stack.js';

/** `npm run dev:cluster` as a developer runs it, then stopped as Ctrl-C or a process manager would. */
let dev: ChildService | undefined;
afterAll(async () => {
  if (dev && dev.proc.exitCode === null) {
    dev.kill('SIGKILL');
    await dev.exited;
  }
});

const printed = (name: string) => new RegExp(`^\\s+${name}=(\\S+)$`, 'm').exec(dev!.output())?.[1] ?? '';
/** Processes whose command line names `dir` (the servers run with their data directories in it). */
const processesIn = (dir: string) => {
  try {
    return execFileSync('pgrep', ['-f', dir]).toString().trim();
  } catch {
    return ''; // pgrep exits 1 when none matches
  }
};

describe('npm run dev:cluster', () => {
  it('starts a 3+3 Redis Cluster, a primary with a synchronous standby and the gateway on them; SIGTERM stops and removes everything', async () => {
    dev = spawnService('scripts/dev-cluster.ts', {});
    await dev.waitFor(/DATABASE_URL=/, 120_000);
    await dev.waitFor(/web listening/, 120_000);
    const root = /in (\/\S+gw-dev-cluster-\w+)/.exec(dev.output())![1];
    const gatewayPid = Number(/gateway \(pid (\d+)\)/.exec(dev.output())![1]);
    const seeds = printed('REDIS_CLUSTER_NODES').split(',');
    expect(seeds).toHaveLength(6);
    expect(printed('REDIS_PREFIX')).toMatch(/\{\w+\}/);
    expect(printed('DATABASE_URL')).toMatch(/^postgres:\/\/\w+@127\.0\.0\.1:\d+,127\.0\.0\.1:\d+\/\w+\?target_session_attrs=primary$/);

    for (const seed of seeds) {
      const node = createRedis(`redis://${seed}`, 'blocking');
      try {
        expect(String(await node.call('CLUSTER', 'INFO'))).toMatch(/cluster_state:ok/);
      } finally {
        node.disconnect();
      }
    }
    const sql = postgres(printed('DATABASE_URL'), { max: 1, onnotice: () => {} });
    try {
      const [{ standby }] = await sql<{ standby: boolean }[]>`SELECT pg_is_in_recovery() AS standby`;
      expect(standby).toBe(false);
      const [{ sync }] = await sql<{ sync: string }[]>`SELECT string_agg(sync_state, ',') AS sync FROM pg_stat_replication`;
      expect(sync).toBe('sync');
    } finally {
      await sql.end();
    }
    expect((await fetch(`http://127.0.0.1:${printed('PORT')}/readyz`)).status).toBe(200);
    expect(processesIn(root)).not.toBe('');

    dev.kill('SIGTERM');
    expect(await dev.exited).toBe(0);
    expect(existsSync(root)).toBe(false);
    expect(() => process.kill(gatewayPid, 0)).toThrow(/ESRCH/);
    expect(processesIn(root)).toBe('');
  }, 240_000);
});

import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { parseConfig } from '../../src/config.js';
import { SCOPES } from '../../src/auth/scopes.js';
import { createSql } from '../../src/db.js';
import { createRedis } from '../../src/redis.js';
import { startRedisCluster, type RedisCluster } from '../helpers/redis-cluster.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { createTestEnv, freePort, spawnService, type ChildService, type TestEnv } from '../helpers/stack.js';
import { apiFetch } from '../helpers/openapi-contract.js';

/**
 * The service on a real Redis Cluster of 3 masters + 3 replicas (REDIS_CLUSTER_NODES), as
 * separate web and worker processes: every connection is a cluster client, so commands for
 * keys on another master than the one asked are redirected inside the client and never reach
 * a caller as MOVED; a cluster it cannot use stops the process at start with one line.
 */
let cluster: RedisCluster;
let t: TestEnv;
const procs: ChildService[] = [];
beforeAll(async () => {
  [cluster, t] = await Promise.all([startRedisCluster(), createTestEnv({ LOG_LEVEL: 'info' })]);
});
afterAll(async () => {
  for (const p of procs) p.kill('SIGKILL');
  await Promise.all(procs.map((p) => p.exited));
  await t?.dropDatabase();
  await cluster?.destroy();
});

/** A `{tag}` prefix whose slot the first seed node does not serve: a plain client asking it gets MOVED. */
async function prefixServedElsewhere(): Promise<string> {
  const first = createRedis(cluster.nodes[0].url, 'blocking');
  try {
    for (;;) {
      const prefix = `{t${randomBytes(4).toString('hex')}}`;
      const moved = await first.get(`${prefix}:probe`).then(
        () => false,
        (err: Error) => {
          if (/^MOVED /.test(err.message)) return true;
          throw err;
        },
      );
      if (moved) return prefix;
    }
  } finally {
    first.disconnect();
  }
}

const start = (entry: string, env: Record<string, string>) => {
  const p = spawnService(entry, env);
  procs.push(p);
  return p;
};

describe('REDIS_CLUSTER_NODES: the service on a 3-master Redis Cluster', () => {
  it('a web process answers POST /v1/events 201 once a worker process committed it, with no redirection reaching anyone', async () => {
    const env: Record<string, string> = { ...t.env, REDIS_CLUSTER_NODES: cluster.seeds, REDIS_PREFIX: await prefixServedElsewhere() };
    const port = await freePort();
    const worker = start('workers/index.ts', env);
    const web = start('src/web.ts', { ...env, PORT: String(port) });
    await Promise.all([worker.waitFor(/workers started/), web.waitFor(/web listening/)]);

    const sql = createSql(t.env.DATABASE_URL, { max: 1 });
    const app = await createApplication(sql, 'cluster', [...SCOPES]).finally(() => sql.end());
    const headers = { Authorization: `Bearer ${app.apiKey}`, 'X-Service-App-ID': app.appId, 'Content-Type': 'application/json' };
    const base = `http://127.0.0.1:${port}`;
    const created = await apiFetch(`${base}/v1/events`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ event_type: 'cluster.check', payload: { n: 1 } }),
    });
    expect(created.status).toBe(201);
    const { id } = (await created.json()) as { id: string };
    const listed = (await (await apiFetch(`${base}/v1/events?limit=10`, { headers })).json()) as { data: { id: string }[] };
    expect(listed.data.map((e) => e.id)).toEqual([id]);

    // The queue's keys are on the cluster, on the master that serves the prefix's slot.
    const masters = await cluster.masters();
    const counts = await Promise.all(
      masters.map(async (m) => {
        const c = createRedis(m.url, 'blocking');
        try {
          return ((await c.keys(`${env.REDIS_PREFIX}:*`)) as string[]).length;
        } finally {
          c.disconnect();
        }
      }),
    );
    expect(counts.filter((n) => n > 0)).toHaveLength(1);
    expect(counts[0]).toBe(0); // not on the first seed: every command was redirected by the client
    for (const p of [web, worker]) expect(p.output()).not.toMatch(/MOVED|CROSSSLOT|ASK /);
  });

  it.each([
    [
      'seed nodes that do not answer',
      async () => ({ REDIS_CLUSTER_NODES: `127.0.0.1:${await freePort()}`, REDIS_PREFIX: '{gw}' }),
      /no seed node of REDIS_CLUSTER_NODES answered/,
    ],
    [
      'a prefix without a hash tag',
      async () => ({ REDIS_CLUSTER_NODES: cluster.seeds, REDIS_PREFIX: 'gw' }),
      /^config error: REDIS_PREFIX: must hold a \{hash tag\}/m,
    ],
    [
      'a cluster that serves no slot',
      async () => {
        const lone = await startRedisServer({ args: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'] });
        onTestFinished(() => lone.destroy());
        return { REDIS_CLUSTER_NODES: `127.0.0.1:${lone.port}`, REDIS_PREFIX: '{gw}' };
      },
      /cluster_state:fail, 0 of 16384 slots served/,
    ],
  ])('%s stops a web process at start with one line', async (_name, env, line) => {
    const web = start('src/web.ts', { ...t.env, ...(await env()), PORT: String(await freePort()) });
    expect(await web.exited).toBe(1);
    expect(web.output()).toMatch(line);
    expect(web.output()).not.toMatch(/\n\s+at /); // no stack trace
  });
});

describe('REDIS_CLUSTER_NODES on a cluster that requires a password', () => {
  let secured: RedisCluster;
  beforeAll(async () => {
    secured = await startRedisCluster({ password: 'cluster-secret' });
  }, 120_000);
  afterAll(() => secured?.destroy());

  it('takes the password from REDIS_URL for every node: events are committed and answered 201', async () => {
    // REDIS_URL's host is not used with REDIS_CLUSTER_NODES: only its credentials are.
    const env = {
      ...t.env,
      REDIS_URL: 'redis://:cluster-secret@unused.invalid:6379/0',
      REDIS_CLUSTER_NODES: secured.seeds,
      REDIS_PREFIX: '{pw}',
    };
    const port = await freePort();
    const worker = start('workers/index.ts', env);
    const web = start('src/web.ts', { ...env, PORT: String(port) });
    await Promise.all([worker.waitFor(/workers started/), web.waitFor(/web listening/)]);
    const sql = createSql(t.env.DATABASE_URL, { max: 1 });
    const app = await createApplication(sql, 'cluster-pw', [...SCOPES]).finally(() => sql.end());
    const created = await apiFetch(`http://127.0.0.1:${port}/v1/events`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${app.apiKey}`, 'X-Service-App-ID': app.appId, 'Content-Type': 'application/json' },
      body: JSON.stringify({ event_type: 'cluster.password', payload: {} }),
    });
    expect(created.status).toBe(201);
    for (const p of [web, worker]) expect(p.output()).not.toMatch(/NOAUTH|WRONGPASS/);
  });

  it('a wrong password stops a web process at start with one line and no stack trace', async () => {
    const web = start('src/web.ts', {
      ...t.env,
      REDIS_URL: 'redis://:not-the-secret@unused.invalid:6379/0',
      REDIS_CLUSTER_NODES: secured.seeds,
      REDIS_PREFIX: '{pw}',
      PORT: String(await freePort()),
    });
    expect(await web.exited).toBe(1);
    expect(web.output()).toMatch(/WRONGPASS|invalid username-password|NOAUTH/i);
    expect(web.output()).not.toMatch(/\n\s+at /);
    expect(web.output()).not.toContain('not-the-secret');
  });
});

describe('REDIS_CLUSTER_NODES parsing', () => {
  it('takes host:port seeds (IPv6 in brackets) and makes them the target of every connection', () => {
    const config = parseConfig({ REDIS_CLUSTER_NODES: 'redis-a:6379, 10.0.0.2:7000,[::1]:7001', REDIS_PREFIX: 'prod:{gw}' });
    expect(config.redis).toEqual({
      clusterNodes: [
        { host: 'redis-a', port: 6379 },
        { host: '10.0.0.2', port: 7000 },
        { host: '::1', port: 7001 },
      ],
    });
    expect(parseConfig({}).redis).toEqual({ url: 'redis://127.0.0.1:6379/0' });
  });

  it('refuses what is not a list of host:port with one line naming the variable', () => {
    for (const bad of ['redis-a', 'redis-a:0', 'redis-a:70000', 'redis://redis-a:6379', ',', 'a:1,b']) {
      expect(() => parseConfig({ REDIS_CLUSTER_NODES: bad, REDIS_PREFIX: '{gw}' }), bad).toThrow(
        /^REDIS_CLUSTER_NODES: expected comma-separated host:port/,
      );
    }
  });
});

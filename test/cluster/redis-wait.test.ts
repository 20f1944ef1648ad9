import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { SCOPES } from '../../src/auth/scopes.js';
import { createSql, type Sql } from '../../src/db.js';
import { createRedis, type Redis } from '../../src/redis.js';
import { startRedisCluster, type RedisCluster } from '../helpers/redis-cluster.js';
import type { RedisServer } from '../helpers/redis-server.js';
import { CASES } from '../inbound/cases.js';
import { TelegramFake } from '../fakes/telegram.js';
import { createTestEnv, freePort, spawnService, type ChildService, type TestEnv } from '../helpers/stack.js';
import { apiFetch } from '../helpers/openapi-contract.js';

/**
 * REDIS_WAIT_REPLICAS (default on when the cluster has replicas): a job is acknowledged (202)
 * only once a replica of its queue's master has it, so killing that master right after the
 * answers loses nothing; a replica that cannot confirm turns the answer into a 503.
 */
const PREFIX = '{rw}';
let cluster: RedisCluster;
let t: TestEnv;
let sql: Sql;
let admin: Redis;
let web: ChildService;
let worker: ChildService;
let base: string;
let tg: TelegramFake;
let connectionId: string;
let headers: Record<string, string>;
/** A Telegram connection's webhook path, and a signed delivery to post at it. */
const telegram = CASES.find((c) => c.platform === 'TELEGRAM')!;
let inboundPath: string;
const deliver = (n: number) => {
  const d = telegram.text(n, 'hello', base + inboundPath);
  return fetch(base + inboundPath, { method: 'POST', headers: d.headers, body: d.body });
};
beforeAll(async () => {
  [cluster, t, tg] = await Promise.all([startRedisCluster(), createTestEnv({ LOG_LEVEL: 'info' }), TelegramFake.start()]);
  sql = createSql(t.env.DATABASE_URL, { max: 2 });
  admin = createRedis({ clusterNodes: cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })) }, 'blocking');
  admin.on('error', () => {}); // the killed master's refusals, while the client follows the failover
  const env = { ...t.env, REDIS_CLUSTER_NODES: cluster.seeds, REDIS_PREFIX: PREFIX };
  const port = await freePort();
  worker = spawnService('workers/index.ts', env);
  web = spawnService('src/web.ts', { ...env, PORT: String(port), EVENT_WAIT_MS: '1500' });
  await Promise.all([worker.waitFor(/workers started/), web.waitFor(/web listening/)]);
  const app = await createApplication(sql, 'redis-wait', [...SCOPES]);
  headers = { Authorization: `Bearer ${app.apiKey}`, 'X-Service-App-ID': app.appId, 'Content-Type': 'application/json' };
  base = `http://127.0.0.1:${port}`;
  const conn = await apiFetch(`${base}/v1/platform-connections`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ platform_name: 'TELEGRAM', name: 'tg', config: telegram.config(tg.url) }),
  });
  expect(conn.status).toBe(201);
  const created = (await conn.json()) as { id: string; webhook_url: string };
  inboundPath = new URL(created.webhook_url).pathname;
  connectionId = created.id;
}, 120_000);
afterAll(async () => {
  for (const p of [web, worker]) p?.kill('SIGKILL');
  await Promise.all([web?.exited, worker?.exited]);
  admin?.disconnect();
  await sql?.end();
  await tg?.close();
  await t?.dropDatabase();
  await cluster?.destroy();
});

const post = (body: unknown, key?: string) =>
  apiFetch(`${base}/v1/events`, {
    method: 'POST',
    headers: key ? { ...headers, 'Idempotency-Key': key } : headers,
    body: JSON.stringify(body),
  });

/** The master serving the queues' slot now, and its replica. */
async function queueShard(): Promise<{ master: RedisServer; replica?: RedisServer }> {
  const slot = Number(await admin.call('CLUSTER', 'KEYSLOT', PREFIX));
  const ranges = (await admin.call('CLUSTER', 'SLOTS')) as [number, number, ...[string, number][]][];
  const [, , master, replica] = ranges.find(([from, to]) => from <= slot && slot <= to)!;
  const byPort = (port?: number) => cluster.nodes.find((n) => n.port === port);
  return { master: byPort(master[1])!, replica: byPort(replica?.[1]) };
}

async function pidOf(node: RedisServer): Promise<number> {
  const c = createRedis(node.url, 'blocking');
  try {
    return Number(/process_id:(\d+)/.exec(await c.info('server'))![1]);
  } finally {
    c.disconnect();
  }
}

const committed = async (ids: string[]) =>
  Number((await sql<{ n: string }[]>`SELECT count(*) AS n FROM events WHERE id = ANY(${ids}::uuid[])`)[0].n);

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe('REDIS_WAIT_REPLICAS on a 3-master + 3-replica cluster', () => {
  it('answers 202 (inbound 200) once the replica has the job, 503 while it cannot confirm, 201 when PostgreSQL has it; a retry is one event', async () => {
    expect((await post({ event_type: 'wait.ok', payload: {} })).status).toBe(201);
    const { replica } = await queueShard();
    const replicaPid = await pidOf(replica!);
    const workerPid = worker.proc.pid!;
    // The worker paused: nothing commits, so an answer can only be 202 (queued) or 503.
    process.kill(workerPid, 'SIGSTOP');
    expect((await post({ event_type: 'wait.queued', payload: {} })).status).toBe(202);
    expect((await deliver(1)).status).toBe(200);

    process.kill(replicaPid, 'SIGSTOP');
    try {
      const started = Date.now();
      const refused = await post({ event_type: 'wait.replica_stopped', payload: {} }, 'retry-me');
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('UNAVAILABLE');
      // Bounded: the 1 s WAIT within the 1.5 s the request waits for a commit anyway.
      expect(Date.now() - started).toBeLessThan(4_000);
      // The platform is not told 200 either: it redelivers later.
      const inbound = await deliver(2);
      expect(inbound.status).toBe(503);
      expect(inbound.headers.get('retry-after')).toBe('1');

      // A commit makes it a 201 although no replica confirmed the job: the event is in PostgreSQL.
      process.kill(workerPid, 'SIGCONT');
      const created = await post({ event_type: 'wait.committed', payload: {} });
      expect(created.status).toBe(201);
      expect(await committed([((await created.json()) as { id: string }).id])).toBe(1);
      // So is a send the worker completes within the wait: it is in PostgreSQL as sent.
      const sent = await apiFetch(`${base}/v1/messages`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ platform_connection_id: connectionId, to_external_id: '4242', message: 'sent unreplicated' }),
      });
      expect(sent.status).toBe(201);
      expect(((await sent.json()) as { status: string }).status).toBe('sent');
    } finally {
      process.kill(workerPid, 'SIGCONT');
      process.kill(replicaPid, 'SIGCONT');
    }
    expect((await deliver(2)).status).toBe(200); // the platform's redelivery
    // The refused attempt's job was on the master and may run; the client's retry under the
    // same key is the same event id, stored once.
    const retried = await post({ event_type: 'wait.replica_stopped', payload: {} }, 'retry-me');
    expect(retried.status).toBe(201);
    const { id } = (await retried.json()) as { id: string };
    await until('the stopped worker drained', async () => (await committed([id])) === 1);
    const rows = await sql<{ id: string }[]>`SELECT id FROM events WHERE event_type = 'wait.replica_stopped'`;
    expect(rows.map((r) => r.id)).toEqual([id]);
  }, 120_000);

  it('loses no 202-acknowledged job when the master is killed right after, and the worker resumes after the failover', async () => {
    const { master } = await queueShard();
    const workerPid = worker.proc.pid!;
    // The worker paused across the failover (its connections to the dead master break under it).
    process.kill(workerPid, 'SIGSTOP');
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => post({ event_type: 'wait.failover', payload: { i } })));
    await master.stop('SIGKILL');
    const acknowledged: string[] = [];
    for (const a of answers) if (a.status === 202) acknowledged.push(((await a.json()) as { id: string }).id);
    expect(acknowledged.length).toBeGreaterThan(0);

    // The replica is promoted; the new master has no replica until the old one rejoins as one.
    await until('the replica is promoted', async () => (await cluster.masters()).length === 3);
    process.kill(workerPid, 'SIGCONT');
    await until('every acknowledged event is committed', async () => (await committed(acknowledged)) === acknowledged.length).catch(
      // Tell a lost job (queue empty) from a stuck worker (jobs still waiting).
      async (err: Error) => {
        const q = `${PREFIX}:q:ledger`;
        const [wait, active, failed] = await Promise.all([admin.llen(`${q}:wait`), admin.llen(`${q}:active`), admin.zcard(`${q}:failed`)]);
        const done = await committed(acknowledged);
        throw new Error(
          `${err.message}: ${done} of ${acknowledged.length} committed; ledger wait ${wait} active ${active} failed ${failed}\n${worker.output().slice(-3000)}`,
        );
      },
    );
    expect(await committed(acknowledged)).toBe(acknowledged.length);

    // Without a replica the shard queues nothing (503s); what commits within the wait is a 201.
    const orphan = await post({ event_type: 'wait.orphan', payload: {} });
    expect(orphan.status).toBe(201); // committed: PostgreSQL has it, no replica needed
    await master.start();
    await until('the old master replicates the new one', async () => (await queueShard()).replica?.port === master.port);
    const after = await post({ event_type: 'wait.after', payload: {} });
    expect(after.status).toBe(201);
    expect(worker.output()).not.toMatch(/MOVED|CROSSSLOT/);
  }, 180_000);
});

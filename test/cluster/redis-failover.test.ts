import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { SCOPES } from '../../src/auth/scopes.js';
import { createSql, type Sql } from '../../src/db.js';
import { createLogger } from '../../src/logger.js';
import { closeQueues, createQueues, enqueue, queueFor, shardOf, type LedgerEvent, type Queues } from '../../src/queues.js';
import { createRedis, type Redis } from '../../src/redis.js';
import { TelegramFake } from '../fakes/telegram.js';
import { tgText } from '../fakes/inbound/payloads.js';
import { telegramHeaders } from '../fakes/inbound/signers.js';
import { eventually } from '../helpers/connections.js';
import { apiFetch } from '../helpers/openapi-contract.js';
import { startRedisCluster, type RedisCluster } from '../helpers/redis-cluster.js';
import { createTestEnv, freePort, spawnService, type ChildService, type TestEnv } from '../helpers/stack.js';

/**
 * Redis failovers under the sharded queues (QUEUE_SHARDS=6) with REDIS_WAIT_REPLICAS=1 on a
 * 3-master + 3-replica cluster, the service as separate web and worker processes: what was
 * acknowledged as queued survives its shard's master being killed right after, a send whose
 * enqueue the failover refused is enqueued again by the client's retry and sent once, and
 * every worker of a killed master's shards takes jobs again (before the ioredis patch, one to
 * four of the process's queues took none, in four runs of five).
 */
const PREFIX = `{rf${randomBytes(3).toString('hex')}}`;
const SHARDS = 6;
const TG_SECRET = 'tg-failover-secret';
let cluster: RedisCluster;
let t: TestEnv;
let sql: Sql;
let admin: Redis;
let queues: Queues;
let tg: TelegramFake;
let web: ChildService;
let worker: ChildService;
let base: string;

beforeAll(async () => {
  [cluster, t, tg] = await Promise.all([startRedisCluster(), createTestEnv({ LOG_LEVEL: 'info' }), TelegramFake.start()]);
  sql = createSql(t.env.DATABASE_URL, { max: 2 });
  admin = createRedis({ clusterNodes: cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })) }, 'blocking');
  admin.on('error', () => {}); // a killed master's refusals, while the client follows the failover
  queues = createQueues(admin, { REDIS_PREFIX: PREFIX, QUEUE_SHARDS: SHARDS }, createLogger('silent'));
  const env = {
    ...t.env,
    REDIS_CLUSTER_NODES: cluster.seeds,
    REDIS_PREFIX: PREFIX,
    QUEUE_SHARDS: String(SHARDS),
    REDIS_WAIT_REPLICAS: '1',
    OUTBOUND_ADDRESS_POLICY: 'any',
  };
  const port = await freePort();
  worker = spawnService('workers/index.ts', env);
  // Short waits for a commit or a send: with the worker paused, an answer is 202 within them.
  web = spawnService('src/web.ts', { ...env, PORT: String(port), EVENT_WAIT_MS: '1500', SEND_WAIT_MS: '1500' });
  // Generous: tsx compiles the sources first, slow on a loaded machine.
  await Promise.all([worker.waitFor(/workers started/, 180_000), web.waitFor(/web listening/, 180_000)]);
  base = `http://127.0.0.1:${port}`;
}, 300_000);
afterAll(async () => {
  for (const p of [web, worker]) p?.kill('SIGKILL');
  await Promise.all([web?.exited, worker?.exited]);
  if (queues) await closeQueues(queues);
  admin?.disconnect();
  await sql?.end();
  await tg?.close();
  await t?.dropDatabase();
  await cluster?.destroy();
});

/**
 * The master serving `key` and its replica, once the nodes' own view names the replica: a node
 * that just rejoined as a replica (the test before put it back) reaches every node's CLUSTER
 * SLOTS a moment after its link is up.
 */
const servingWithReplica = (key: string) =>
  eventually(
    async () => {
      const s = await cluster.serving(key);
      return s.replica ? { ...s, replica: s.replica } : undefined;
    },
    30_000,
    'the replica of the shard known to the cluster',
  );

/** An application with a Telegram connection on the fake; its queue shard's master and replica. */
async function appOnShard() {
  const a = await createApplication(sql, `failover-${randomBytes(3).toString('hex')}`, [...SCOPES]);
  const headers = { Authorization: `Bearer ${a.apiKey}`, 'X-Service-App-ID': a.appId, 'Content-Type': 'application/json' };
  const conn = await apiFetch(`${base}/v1/platform-connections`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      platform_name: 'TELEGRAM',
      name: 'tg',
      config: { bot_token: '777002:failover-bot-token', secret_token: TG_SECRET, api_base_url: tg.url },
    }),
  });
  expect(conn.status).toBe(201);
  const { id: connectionId, webhook_url } = (await conn.json()) as { id: string; webhook_url: string };
  // Every queue of the application's shard shares one hash tag: one slot, one master.
  const shard = await servingWithReplica(queueFor(queues, 'ledger', a.appId).qualifiedName);
  return { appId: a.appId, headers, connectionId, hookPath: new URL(webhook_url).pathname, ...shard };
}

const post = (path: string, headers: Record<string, string>, body: unknown) =>
  apiFetch(`${base}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });

/** The texts the platform fake received, each with how many times. */
const received = () => {
  const counts = new Map<string, number>();
  for (const r of tg.server.requests) {
    const text = (r.json as { text?: string } | undefined)?.text;
    if (text) counts.set(text, (counts.get(text) ?? 0) + 1);
  }
  return counts;
};

const ledgerCount = async (appId: string, eventType: string) =>
  Number((await sql<{ n: string }[]>`SELECT count(*) AS n FROM events WHERE app_id = ${appId} AND event_type = ${eventType}`)[0].n);

describe('Redis failover with QUEUE_SHARDS=6 and REDIS_WAIT_REPLICAS=1', () => {
  it("loses none of the 202s and inbound 200s its shard's master acknowledged right before it was killed", async () => {
    const app = await appOnShard();
    const workerPid = worker.proc.pid!;
    // The worker paused: nothing is committed or sent, so every answer is queued (202, inbound 200) or 503.
    process.kill(workerPid, 'SIGSTOP');
    let events: Response[];
    let sends: Response[];
    let inbound: Response[];
    try {
      [events, sends, inbound] = await Promise.all([
        Promise.all(
          Array.from({ length: 20 }, (_, i) => post('/v1/events', app.headers, { event_type: 'failover.queued', payload: { i } })),
        ),
        Promise.all(
          Array.from({ length: 5 }, (_, i) =>
            post('/v1/messages', app.headers, {
              platform_connection_id: app.connectionId,
              to_external_id: String(5000 + i),
              message: `queued ${i}`,
            }),
          ),
        ),
        Promise.all(
          Array.from({ length: 5 }, (_, i) =>
            fetch(base + app.hookPath, {
              method: 'POST',
              headers: telegramHeaders(TG_SECRET),
              body: JSON.stringify(tgText(700 + i, 800 + i, `inbound ${i}`)),
            }),
          ),
        ),
      ]);
      await app.master.stop('SIGKILL');
    } finally {
      process.kill(workerPid, 'SIGCONT');
    }
    // A 503 is an honest refusal (its replica did not confirm the job in time on a slow
    // machine): the client retries it. What must not be lost is what was acknowledged.
    for (const r of [...events, ...sends, ...inbound]) expect([200, 202, 503]).toContain(r.status);
    const acked = (answers: Response[], ok: number) => answers.flatMap((r, i) => (r.status === ok ? [i] : []));
    const [ackedEvents, ackedSends, ackedInbound] = [acked(events, 202), acked(sends, 202), acked(inbound, 200)];
    expect(ackedEvents.length + ackedSends.length + ackedInbound.length).toBeGreaterThan(0);

    await cluster.waitForRole(app.replica!, 'master');
    const texts = async (type: string) =>
      (
        await sql<{ t: string }[]>`SELECT payload->'message'->>'text' AS t FROM events WHERE app_id = ${app.appId} AND event_type = ${type}`
      ).map((r) => r.t);
    const committed = async () =>
      (
        await sql<
          { i: number }[]
        >`SELECT (payload->>'i')::int AS i FROM events WHERE app_id = ${app.appId} AND event_type = 'failover.queued'`
      ).map((r) => r.i);
    const holdsAll = (have: (string | number)[], want: (string | number)[]) => want.every((w) => have.includes(w)) || undefined;
    await eventually(async () => holdsAll(await committed(), ackedEvents), 60_000, 'every 202 committed');
    await eventually(
      async () =>
        holdsAll(
          await texts('message.inbound'),
          ackedInbound.map((i) => `inbound ${i}`),
        ),
      60_000,
      'every inbound 200 in the ledger',
    );
    await eventually(
      async () =>
        holdsAll(
          await texts('message.outbound'),
          ackedSends.map((i) => `queued ${i}`),
        ),
      60_000,
      'every queued send sent',
    );
    // Written once each, whatever the failover repeated.
    expect(new Set(await committed()).size).toBe((await committed()).length);
    const counts = received();
    for (const i of ackedSends) expect(counts.get(`queued ${i}`)).toBe(1);

    // Whole again for the next test: the old master back as the new one's replica.
    await app.master.start();
    await cluster.waitForRole(app.master, 'replica');
  }, 180_000);

  it('a send refused during the failover is enqueued again by its retry (same Idempotency-Key) and sent exactly once', async () => {
    const app = await appOnShard();
    const send = () =>
      apiFetch(`${base}/v1/messages`, {
        method: 'POST',
        headers: { ...app.headers, 'Idempotency-Key': 'retried-send' },
        body: JSON.stringify({ platform_connection_id: app.connectionId, to_external_id: '6001', message: 'retried once' }),
      });
    await app.master.stop('SIGKILL');
    // The message is recorded in PostgreSQL, but its job cannot reach the dead master.
    const refused = await send();
    expect(refused.status).toBe(503);

    await cluster.waitForRole(app.replica!, 'master');
    const retried = await eventually(
      async () => {
        const r = await send();
        return r.status === 503 ? undefined : r;
      },
      30_000,
      'the retry accepted after the promotion',
    );
    expect([201, 202]).toContain(retried.status);
    const { id } = (await retried.json()) as { id: string };
    await eventually(async () => (await ledgerCount(app.appId, 'message.outbound')) === 1, 60_000, 'the retried send sent');
    const [row] = await sql<{ status: string }[]>`SELECT status FROM outbound_messages WHERE id = ${id}`;
    expect(row.status).toBe('sent');
    // Another retry of the same key changes nothing.
    expect((await send()).status).toBe(201);
    expect(received().get('retried once')).toBe(1);

    await app.master.start();
    await cluster.waitForRole(app.master, 'replica');
  }, 180_000);

  it('serves again every shard whose master was killed, those idle at the kill included', async () => {
    // One application on each shard; the workers of every shard are idle, waiting on their master.
    const apps = new Map<number, string>();
    while (apps.size < SHARDS) {
      const a = await createApplication(sql, `every-shard-${randomBytes(3).toString('hex')}`, [...SCOPES]);
      if (!apps.has(shardOf(a.appId, SHARDS))) apps.set(shardOf(a.appId, SHARDS), a.appId);
    }
    const { master, replica } = await servingWithReplica(queueFor(queues, 'ledger', apps.get(0)).qualifiedName);
    await master.stop('SIGKILL');
    await cluster.waitForRole(replica!, 'master');
    // A supervisor starts the killed node again: it comes back as a master of its old slots
    // until the cluster tells it otherwise, then replicates the new master.
    await master.start();
    await cluster.waitForRole(master, 'replica');
    const events: LedgerEvent[] = [...apps.values()].map((appId) => ({
      id: randomUUID(),
      app_id: appId,
      event_type: 'failover.every-shard',
      payload: {},
      edges: [],
      attachments: [],
    }));
    // Queued once the cluster serves every slot again (the test's own client follows the failover too).
    for (const event of events) {
      await eventually(
        () =>
          enqueue(queues, 'ledger', { event }).then(
            () => true,
            () => undefined,
          ),
        30_000,
        `event of shard ${shardOf(event.app_id, SHARDS)} queued`,
      );
    }
    const committed = async () =>
      (await sql<{ id: string }[]>`SELECT id FROM events WHERE id IN ${sql(events.map((e) => e.id))}`).map((r) => r.id);
    await eventually(async () => ((await committed()).length === events.length ? true : undefined), 30_000, 'every shard served').catch(
      async (err) => {
        const done = await committed();
        const stuck = events.filter((e) => !done.includes(e.id)).map((e) => `${shardOf(e.app_id, SHARDS)}of${SHARDS}`);
        throw new Error(`${(err as Error).message}: ledger shards ${stuck.join(', ')} took no job`);
      },
    );
  }, 180_000);
});

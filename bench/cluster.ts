/**
 * Cluster: the same ingest, webhook and fan-out load against the service on single-node Redis
 * and on a 3-master + 3-replica Redis Cluster with QUEUE_SHARDS=6 and sharded pub/sub, in one
 * run, as ratios; keys and commands per master; cluster-bus messages per wake, classic vs
 * sharded; and how soon a commit can be read on a streaming replica vs the primary.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { createApplication } from '../src/apps/applications.js';
import { createSql } from '../src/db.js';
import { listEvents } from '../src/ledger/read.js';
import { shardOf } from '../src/queues.js';
import { publishWakes, wakeChannels } from '../src/ledger/wake.js';
import { writeEvents, type CommittedEvent } from '../src/ledger/write.js';
import { migrate } from '../src/migrate.js';
import { createRedis } from '../src/redis.js';
import { busCounters, busPer } from '../test/helpers/cluster-bus.js';
import { startReplicatedPostgres } from '../test/helpers/postgres-replicated.js';
import { startRedisCluster, type RedisCluster } from '../test/helpers/redis-cluster.js';
import { openSse } from '../test/helpers/sse.js';
import { percentile, ratio, round, runLoad, startStack, target, type Bench, type BenchStack } from './lib.js';

const APPS = 6;
const WAKES = 500;
const REPLICA_COMMITS = 200;

/** A loopback webhook receiver answering 200, counting deliveries. */
async function receiver() {
  let delivered = 0;
  let last = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      delivered++;
      last = performance.now();
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    delivered: () => delivered,
    last: () => last,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/**
 * `clients` POST /v1/events round-robin over APPS applications for `durationS`; each
 * application has one webhook subscription (to a loopback receiver) and one open SSE stream.
 */
async function serviceLoad(stack: BenchStack, clients: number, durationS: number) {
  const hooks = await receiver();
  // One application on each of the cluster run's QUEUE_SHARDS (= APPS) shards, in both runs:
  // random ids left whole masters idle in some runs, measuring the draw instead of the cluster.
  const apps: Awaited<ReturnType<BenchStack['createApp']>>[] = [];
  while (apps.length < APPS) {
    const app = await stack.createApp();
    if (!apps.some((a) => shardOf(a.appId, APPS) === shardOf(app.appId, APPS))) apps.push(app);
  }
  const lags: number[] = [];
  const streams = [];
  for (const app of apps) {
    const r = await fetch(`${stack.base}/v1/webhook-subscriptions`, {
      method: 'POST',
      headers: { ...app.headers, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench', target_url: hooks.url, event_patterns: ['bench.*'] }),
    });
    if (r.status !== 201) throw new Error(`subscription: ${r.status} ${await r.text()}`);
    const sse = await openSse(`${stack.base}/events/stream`, { headers: app.headers });
    if (sse.status !== 200) throw new Error(`stream: ${sse.status} ${sse.text}`);
    streams.push(sse);
    void (async () => {
      for (;;) {
        const f = await sse.next(3_600_000).catch(() => undefined);
        if (!f) return;
        if (f.data) lags.push(Date.now() - Date.parse((JSON.parse(f.data) as { createdAt: string }).createdAt));
      }
    })();
  }
  const started = performance.now();
  const load = await runLoad(stack.base, {
    clients,
    durationS,
    warmupS: 2,
    request: (i) => ({
      method: 'POST',
      path: '/v1/events',
      headers: { ...apps[i % APPS].headers, 'content-type': 'application/json' },
      body: JSON.stringify({ event_type: 'bench.cluster', payload: { i, note: 'a small realistic payload' } }),
    }),
  });
  const posted = (await stack.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE event_type = 'bench.cluster'`)[0].n;
  // Webhooks drain behind the load: every committed event once per subscription, bounded.
  const deadline = performance.now() + 120_000;
  while (hooks.delivered() < posted && performance.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  for (const s of streams) s.close();
  await hooks.close();
  lags.sort((a, b) => a - b);
  return {
    committedPerS: load.okPerS,
    postP99Ms: load.p99Ms,
    errors: load.errors,
    webhooksPerS: round((hooks.delivered() * 1000) / Math.max(1, hooks.last() - started), 1),
    webhooksDelivered: hooks.delivered(),
    committed: posted,
    streamP50Ms: percentile(lags, 50),
    streamP99Ms: percentile(lags, 99),
  };
}

/** DBSIZE and commands served (INFO commandstats) of each master since its stats were reset. */
async function perMaster(cluster: RedisCluster) {
  return Promise.all(
    (await cluster.masters()).map(async (m) => {
      const admin = createRedis(m.url, 'blocking');
      try {
        const keys = await admin.dbsize();
        const stats = await admin.info('commandstats');
        const commands = [...stats.matchAll(/calls=(\d+)/g)].reduce((s, x) => s + Number(x[1]), 0);
        return { port: m.port, keys, commands };
      } finally {
        admin.disconnect();
      }
    }),
  );
}

async function resetStats(cluster: RedisCluster) {
  for (const m of await cluster.masters()) {
    const admin = createRedis(m.url, 'blocking');
    await admin.config('RESETSTAT').finally(() => admin.disconnect());
  }
}

/** Bus messages per wake, classic PUBLISH vs SPUBLISH, APPS applications' channels. */
async function busPerWake(cluster: RedisCluster) {
  const pub = createRedis({ clusterNodes: cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })) }, 'blocking');
  try {
    const apps = Array.from({ length: APPS }, () => randomUUID());
    const run = async (sharded: boolean) => {
      const channels = wakeChannels({ REDIS_PREFIX: '{benchbus}', REDIS_SHARDED_PUBSUB: sharded });
      const before = await busCounters(cluster.nodes);
      for (let i = 0; i < WAKES; i++) await publishWakes(pub, channels, [{ app_id: apps[i % APPS], seq: i + 1 } as CommittedEvent]);
      return busPer(before, await busCounters(cluster.nodes), WAKES);
    };
    return { classic: await run(false), sharded: await run(true) };
  } finally {
    pub.disconnect();
  }
}

/** How long after its commit an event is readable by seq on the synchronous standby vs on the primary (ms). */
async function replicaVisibility() {
  const pg = await startReplicatedPostgres();
  try {
    await migrate(`${pg.primary.base}/gw`);
    const primary = createSql(`${pg.primary.base}/gw`, { max: 2 });
    const replica = createSql(`${pg.standby.base}/gw`, { max: 2 });
    try {
      // The standby has flushed the schema (synchronous commit) but may not have replayed it yet.
      const [{ lsn }] = await primary<{ lsn: string }[]>`SELECT pg_current_wal_lsn()::text AS lsn`;
      const deadline = performance.now() + 10_000;
      while (!(await replica<{ ok: boolean }[]>`SELECT pg_last_wal_replay_lsn() >= ${lsn}::pg_lsn AS ok`)[0].ok) {
        if (performance.now() > deadline) throw new Error('the standby did not replay the schema within 10 s');
        await new Promise((r) => setTimeout(r, 20));
      }
      const app = await createApplication(primary, 'replica-bench', ['events:read']);
      const onPrimary: number[] = [];
      const onReplica: number[] = [];
      for (let i = 0; i < REPLICA_COMMITS; i++) {
        const id = randomUUID();
        const [c] = await writeEvents(primary, [
          { id, app_id: app.appId, event_type: 'bench.replica', payload: { i }, edges: [], attachments: [] },
        ]);
        const t0 = performance.now();
        await listEvents(primary, app.appId, { afterSeq: c.seq - 1 }, 1);
        onPrimary.push(performance.now() - t0);
        const t1 = performance.now();
        while ((await listEvents(replica, app.appId, { afterSeq: c.seq - 1 }, 1)).length === 0 && performance.now() - t1 < 5_000);
        onReplica.push(performance.now() - t1);
      }
      onPrimary.sort((a, b) => a - b);
      onReplica.sort((a, b) => a - b);
      return {
        primaryP50: round(percentile(onPrimary, 50)),
        primaryP99: round(percentile(onPrimary, 99)),
        replicaP50: round(percentile(onReplica, 50)),
        replicaP99: round(percentile(onReplica, 99)),
      };
    } finally {
      await Promise.all([primary.end({ timeout: 5 }), replica.end({ timeout: 5 })]);
    }
  } finally {
    await pg.destroy();
  }
}

const bench: Bench = {
  description:
    'ingest + webhooks + SSE fan-out on single-node Redis vs a 3-master Redis Cluster (QUEUE_SHARDS=6, sharded pub/sub); bus messages per wake; replica vs primary reads',
  async run({ options, log }) {
    const clients = options.clients ?? 16;
    const durationS = options.durationS ?? 12;
    const workers = 'ledger,webhook';

    log(`single-node Redis: 1 web + 1 worker (${workers}), ${clients} clients, ${durationS} s`);
    const singleStack = await startStack({ workerQueues: workers });
    const single = await serviceLoad(singleStack, clients, durationS).finally(() => singleStack.stop());

    log('starting a 3-master + 3-replica Redis Cluster');
    const cluster = await startRedisCluster();
    try {
      log(`Redis Cluster, QUEUE_SHARDS=6, REDIS_SHARDED_PUBSUB=1: 1 web + 1 worker, ${clients} clients, ${durationS} s`);
      const clusterEnv = (waitReplicas: string) => ({
        REDIS_CLUSTER_NODES: cluster.seeds,
        REDIS_PREFIX: `{bench${randomUUID().slice(0, 8)}}`,
        QUEUE_SHARDS: '6',
        REDIS_SHARDED_PUBSUB: '1',
        REDIS_WAIT_REPLICAS: waitReplicas,
      });
      const clusterStack = await startStack({ workerQueues: workers, env: clusterEnv('1') });
      await resetStats(cluster);
      const onCluster = await serviceLoad(clusterStack, clients, durationS).finally(() => clusterStack.stop());
      const masters = await perMaster(cluster);
      // The same cluster without WAIT: how much of the cost is the replica's acknowledgement.
      log(`Redis Cluster as above with REDIS_WAIT_REPLICAS=0: ${clients} clients, ${durationS} s`);
      const noWaitStack = await startStack({ workerQueues: workers, env: clusterEnv('0') });
      const noWait = await serviceLoad(noWaitStack, clients, durationS).finally(() => noWaitStack.stop());
      log(`masters: ${JSON.stringify(masters)}`);
      log(`bus messages per wake, ${WAKES} wakes each way`);
      const bus = await busPerWake(cluster);
      log('replica: a PostgreSQL primary with a synchronous streaming standby');
      const replica = await replicaVisibility();

      const commandShares = masters.map(
        (m) =>
          m.commands /
          Math.max(
            1,
            masters.reduce((s, x) => s + x.commands, 0),
          ),
      );
      const keyShares = masters.map(
        (m) =>
          m.keys /
          Math.max(
            1,
            masters.reduce((s, x) => s + x.keys, 0),
          ),
      );
      const overhead = (s: number | null, c: number | null) => (s === null || c === null || s === 0 ? null : round(1 - c / s, 3));
      const figures: Record<string, number | null> = {
        cluster_committed_per_s: onCluster.committedPerS,
        cluster_post_p99_ms: onCluster.postP99Ms,
        cluster_nowait_committed_per_s: noWait.committedPerS,
        cluster_nowait_post_p99_ms: noWait.postP99Ms,
        cluster_webhooks_per_s: onCluster.webhooksPerS,
        cluster_stream_p50_ms: onCluster.streamP50Ms,
        cluster_stream_p99_ms: onCluster.streamP99Ms,
        min_master_command_share: round(Math.min(...commandShares), 3),
        min_master_key_share: round(Math.min(...keyShares), 3),
        bus_msgs_per_wake_sharded: bus.sharded.sent,
        publishshard_per_wake_sharded: bus.sharded.publishshardSent,
        replica_visible_p50_ms: replica.replicaP50,
        replica_visible_p99_ms: replica.replicaP99,
      };
      const baselines: Record<string, number | null> = {
        single_committed_per_s: single.committedPerS,
        single_post_p99_ms: single.postP99Ms,
        single_webhooks_per_s: single.webhooksPerS,
        single_stream_p50_ms: single.streamP50Ms,
        single_stream_p99_ms: single.streamP99Ms,
        bus_msgs_per_wake_classic: bus.classic.sent,
        publish_per_wake_classic: bus.classic.publishSent,
        primary_read_p50_ms: replica.primaryP50,
        primary_read_p99_ms: replica.primaryP99,
      };
      const ratios = {
        cluster_committed_per_s_vs_single_committed_per_s: ratio(onCluster.committedPerS, single.committedPerS),
        cluster_webhooks_per_s_vs_single_webhooks_per_s: ratio(onCluster.webhooksPerS, single.webhooksPerS),
        cluster_post_p99_ms_vs_single_post_p99_ms: ratio(onCluster.postP99Ms, single.postP99Ms),
        cluster_nowait_committed_per_s_vs_single_committed_per_s: ratio(noWait.committedPerS, single.committedPerS),
        cluster_nowait_post_p99_ms_vs_single_post_p99_ms: ratio(noWait.postP99Ms, single.postP99Ms),
        cluster_stream_p99_ms_vs_single_stream_p99_ms: ratio(onCluster.streamP99Ms, single.streamP99Ms),
        bus_msgs_per_wake_sharded_vs_bus_msgs_per_wake_classic: ratio(bus.sharded.sent, bus.classic.sent),
        replica_visible_p99_ms_vs_primary_read_p99_ms: ratio(replica.replicaP99, replica.primaryP99),
      };
      return {
        figures,
        baselines,
        ratios,
        targets: {
          // The goal: a cluster costs at most 20 % of the single node's throughput on this machine.
          ingest_overhead: target(overhead(single.committedPerS, onCluster.committedPerS), '<=', 0.2),
          webhook_overhead: target(overhead(single.webhooksPerS, onCluster.webhooksPerS), '<=', 0.2),
          // Each master carries a share (an even split would be 0.333).
          min_master_command_share: target(round(Math.min(...commandShares), 3), '>=', 0.1),
          bus_msgs_per_wake_sharded_vs_bus_msgs_per_wake_classic: target(ratio(bus.sharded.sent, bus.classic.sent), '<', 0.5),
        },
        notes: [
          `${clients} closed-loop clients POST /v1/events round-robin over ${APPS} applications for ${durationS} s (2 s warm-up); each application has one webhook subscription (loopback receiver answering 200) and one open SSE stream`,
          'one web and one worker process (ledger, webhook) in both runs; the cluster adds six redis-server processes on the same 2 cores, not cores',
          `single: ${single.committed} events committed, ${single.webhooksDelivered} webhooks delivered, ${single.errors} errors; cluster: ${onCluster.committed} committed, ${onCluster.webhooksDelivered} delivered, ${onCluster.errors} errors; cluster without WAIT: ${noWait.committed} committed, ${noWait.errors} errors`,
          'the cluster runs with REDIS_WAIT_REPLICAS=1 (every 202 waits for a replica, the default with replicas); the nowait figures are the same cluster, a fresh prefix, REDIS_WAIT_REPLICAS=0',
          'webhooks_per_s = deliveries received / (last delivery − load start), the drain after the load included; stream lag = SSE receipt − the event created_at',
          `per master (port: keys, commands during the cluster run): ${masters.map((m) => `${m.port}: ${m.keys}, ${m.commands}`).join('; ')}`,
          `cluster bus per wake (CLUSTER INFO summed over the 6 nodes, ${WAKES} wakes each way): classic ${JSON.stringify(bus.classic)}; sharded ${JSON.stringify(bus.sharded)}`,
          `replica: ${REPLICA_COMMITS} single-event commits on a primary with a synchronous standby (synchronous_commit on: flushed there, replayed later); time until a by-seq read finds the event on the standby vs one read on the primary`,
        ],
      };
    } finally {
      await cluster.destroy();
    }
  },
};
export default bench;

/**
 * Faults of the highly available topology (chaos/cluster.ts `ha`): a Redis master lost or
 * handed over, the PostgreSQL primary lost and its standby promoted, the read replica's replay
 * paused. Each aims at what the scenario's application uses: its queue shard's master (every
 * queue of one shard shares its hash tag, so its slot and its master), and the standby its
 * readers read from.
 */
import postgres from 'postgres';
import { queueFor } from '../src/queues.js';
import type { RedisServer } from '../test/helpers/redis-server.js';
import type { HaCluster } from './cluster.js';
import type { Scenario } from './scenarios.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The master serving the application's queue shard now (every queue of a shard shares its hash tag, so its slot), and its replica. */
async function shardNodes(cluster: HaCluster, appId: string): Promise<{ master: RedisServer; replica: RedisServer; slot: number }> {
  const { slot, master, replica } = await cluster.redisCluster.serving(queueFor(cluster.queues, 'ledger', appId).qualifiedName);
  if (!replica) throw new Error(`the master of slot ${slot} (port ${master.port}) has no replica`);
  return { master, replica, slot };
}

/** The read replica (the standby DATABASE_READ_URL names), for the harness's own session. */
const standbySession = (cluster: HaCluster) =>
  postgres(`${cluster.replicated.standby.base}/${cluster.dbName}`, { max: 1, onnotice: () => {}, connect_timeout: 5 });

/**
 * Scenarios of the `ha` topology, in the order they run: `pg-primary-kill` last, since it
 * leaves the promoted standby alone (no replica for `pg-replica-lag` to pause).
 */
export const FAILOVER_SCENARIOS: Scenario<HaCluster>[] = [
  {
    name: 'redis-master-kill',
    description:
      "kill -9 the Redis master of the application's queue shard under load: the cluster promotes its replica; the old master is started again and rejoins as a replica",
    async fault({ cluster, timing, log, appId, faulted }) {
      const { master, replica, slot } = await shardNodes(cluster, appId);
      faulted(Date.now());
      await master.stop('SIGKILL');
      log(`kill -9 the master of slot ${slot} (port ${master.port}); its replica is on ${replica.port}`);
      const promoted = await cluster.redisCluster.waitForRole(replica, 'master');
      log(`the replica was promoted ${promoted.toFixed(1)} s after the kill`);
      // A supervisor starts the crashed node again: it rejoins as the replica of its old replica.
      await sleep(timing.downMs);
      await master.start();
      const rejoined = await cluster.redisCluster.waitForRole(master, 'replica');
      log(`the old master rejoined as a replica ${rejoined.toFixed(1)} s after its start`);
    },
  },
  {
    name: 'redis-failover',
    description: "CLUSTER FAILOVER on the replica of the application's queue shard: master and replica swap under load",
    async fault({ cluster, log, appId, faulted }) {
      const { master, replica, slot } = await shardNodes(cluster, appId);
      faulted(Date.now());
      await cluster.redisCluster.ask(replica, 'CLUSTER', 'FAILOVER');
      const swapped = await cluster.redisCluster.waitForRole(replica, 'master');
      log(`CLUSTER FAILOVER on port ${replica.port}: master of slot ${slot} ${swapped.toFixed(1)} s later`);
      const rejoined = await cluster.redisCluster.waitForRole(master, 'replica');
      log(`the old master (port ${master.port}) replicates it ${rejoined.toFixed(1)} s after the command`);
    },
  },
  {
    name: 'pg-replica-lag',
    description:
      'the read replica stops replaying WAL (pg_wal_replay_pause) for the long outage while writes go on, then catches up: readers must neither skip nor reorder',
    async fault({ cluster, timing, log, faulted }) {
      const standby = standbySession(cluster);
      let behind = 0;
      try {
        const [{ recovering }] = await standby<{ recovering: boolean }[]>`SELECT pg_is_in_recovery() AS recovering`;
        if (!recovering) throw new Error('the read replica is no standby (promoted by pg-primary-kill, which must run after this)');
        await standby`SELECT pg_wal_replay_pause()`;
        faulted(Date.now());
        log(`read replica's replay paused for ${timing.outageMs} ms`);
        await sleep(timing.outageMs);
        const [lag] = await standby<{ bytes: number }[]>`
          SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::float8 AS bytes`;
        behind = lag.bytes;
        log(`the replica is ${behind} bytes of WAL behind what it received`);
      } finally {
        await standby`SELECT pg_wal_replay_resume()`.catch(() => {});
        await standby.end({ timeout: 1 });
      }
      log('replay resumed');
      if (behind <= 0) return async () => ['the read replica never fell behind: nothing was measured'];
    },
  },
  {
    name: 'pg-primary-kill',
    description:
      'kill -9 the PostgreSQL primary under load; the synchronous standby is promoted a moment later, as an orchestrator would: pools find it, no 201 is lost',
    async fault({ cluster, timing, log, faulted }) {
      faulted(Date.now());
      const killedAt = Date.now();
      await cluster.replicated.primary.kill();
      log(`kill -9 the PostgreSQL primary (port ${cluster.replicated.primary.port})`);
      // The orchestrator's failure detection: meanwhile there is no primary at all.
      await sleep(timing.downMs);
      await cluster.replicated.promote();
      log(`standby (port ${cluster.replicated.standby.port}) promoted ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill`);
    },
  },
];

import { createRedis } from '../../src/redis.js';
import type { RedisServer } from './redis-server.js';

/** Cluster-bus message counters of CLUSTER INFO, summed over `nodes`. */
export interface BusCounters {
  /** Every message a node sent on the bus (pings and pongs included). */
  sent: number;
  received: number;
  /** Classic PUBLISH copies sent (type `publish`). */
  publishSent: number;
  /** Sharded SPUBLISH copies sent to the shard's other nodes (type `publishshard`). */
  publishshardSent: number;
}

/** The bus counters of every node now (each node asked directly, not through a cluster client). */
export async function busCounters(nodes: RedisServer[]): Promise<BusCounters> {
  const total: BusCounters = { sent: 0, received: 0, publishSent: 0, publishshardSent: 0 };
  await Promise.all(
    nodes.map(async (n) => {
      const admin = createRedis(n.url, 'blocking');
      try {
        const info = String(await admin.call('CLUSTER', 'INFO'));
        const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)?.[1] ?? 0);
        total.sent += field('cluster_stats_messages_sent');
        total.received += field('cluster_stats_messages_received');
        total.publishSent += field('cluster_stats_messages_publish_sent');
        total.publishshardSent += field('cluster_stats_messages_publishshard_sent');
      } finally {
        admin.disconnect();
      }
    }),
  );
  return total;
}

/** What happened on the bus between two readings, per `count` (e.g. per wake). */
export function busPer(before: BusCounters, after: BusCounters, count: number): BusCounters {
  const per = (k: keyof BusCounters) => Math.round(((after[k] - before[k]) / count) * 100) / 100;
  return { sent: per('sent'), received: per('received'), publishSent: per('publishSent'), publishshardSent: per('publishshardSent') };
}

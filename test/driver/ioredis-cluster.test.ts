import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { settlement } from './support/settlement.js';

/**
 * ioredis 5.11.1 Cluster failure modes the project patches (patches/ioredis+5.11.1.patch), on a
 * private one-node cluster whose state this file sets by assigning slots.
 */
let server: RedisServer;
let admin: Redis;
beforeAll(async () => {
  server = await startRedisServer({ args: ['--cluster-enabled', 'yes', '--cluster-announce-ip', '127.0.0.1'], clusterBus: true });
  admin = new Redis(server.port, '127.0.0.1', { lazyConnect: true });
  await admin.connect();
});
afterAll(async () => {
  admin?.disconnect();
  await server?.destroy();
});

describe('ioredis Cluster', () => {
  it('settles connect() when its ready check finds the cluster failing, and serves once the cluster is whole', async () => {
    // Half the slots: CLUSTER SLOTS answers (the slot map loads), CLUSTER INFO says cluster_state:fail,
    // as a node does for a moment after a failover it has not yet heard of.
    await admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '8191');
    const cluster = new Cluster([{ host: '127.0.0.1', port: server.port }], { lazyConnect: true, clusterRetryStrategy: () => 50 });
    cluster.on('error', () => {});
    try {
      const reconnecting = new Promise((resolve) => cluster.once('reconnecting', resolve));
      const connecting = cluster.connect();
      // Judged at the end; handled from the start, so a rejection meanwhile is not an unhandled one.
      connecting.catch(() => {});
      // The ready check failed and the client started over on its own.
      await reconnecting;
      await admin.call('CLUSTER', 'ADDSLOTSRANGE', '8192', '16383');
      await new Promise((resolve) => cluster.once('ready', resolve));
      expect(await cluster.set('{x}k', 'v')).toBe('OK');
      // Unpatched, the first connect() never settles: BullMQ's worker awaits exactly this call
      // when it reconnects its blocking connection, and then takes no job again, ever.
      expect(await settlement(connecting, 1_000)).toMatch(/^rejected/);
    } finally {
      cluster.disconnect();
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishAll } from '../../src/pubsub.js';
import { createRedis, type Redis } from '../../src/redis.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';

/**
 * Wakes and commit reports to one Redis server go in one pipeline, which resolves even when its
 * commands fail: each reply carries its own error. A wake that was never published must fail
 * the commit's bookkeeping (its job retries and publishes again), as it already did on a cluster.
 */
describe('publishing wakes to one Redis server', () => {
  let server: RedisServer;
  let redis: Redis;
  beforeAll(async () => {
    // PUBLISH renamed away: every PUBLISH in a pipeline answers an error of its own.
    server = await startRedisServer({ args: ['--rename-command', 'PUBLISH', ''] });
    redis = createRedis(server.url);
    await new Promise((resolve) => redis.once('ready', resolve));
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.destroy();
  });

  it('rejects when a command of the pipeline failed, and resolves when every one went', async () => {
    await expect(publishAll(redis, { sharded: false }, [['gwtest:wake:a', '1']])).rejects.toThrow(/unknown command/i);
    await expect(publishAll(redis, { sharded: true }, [['{a}:gwtest:wake', '1']])).resolves.toBeUndefined();
  });
});

import { GraphQLError } from 'graphql';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { AppError, isUnavailable } from '../../src/errors.js';
import { formatGraphqlError } from '../../src/graphql/context.js';
import { toAppError } from '../../src/http/errors.js';
import { createRedis } from '../../src/redis.js';
import { freePort } from '../helpers/stack.js';

/** Real failures of the real clients, produced against ports where nothing listens. */
async function failureOf(run: () => Promise<unknown>): Promise<unknown> {
  return run().then(
    () => expect.fail('expected a failure'),
    (e: unknown) => e,
  );
}

describe('unavailable backing services', () => {
  it('recognises what ioredis and postgres.js raise when their server is gone', async () => {
    const port = await freePort();
    // Commands parked while reconnecting are flushed with MaxRetriesPerRequestError (its message does not name itself).
    const parked = createRedis(`redis://127.0.0.1:${port}`, 'request', { enableOfflineQueue: true });
    const offline = createRedis(`redis://127.0.0.1:${port}`, 'request');
    parked.on('error', () => {});
    offline.on('error', () => {});
    const sql = postgres(`postgres://postgres@127.0.0.1:${port}/x`, { max: 1, connect_timeout: 2 });
    try {
      const errors = [
        await failureOf(() => parked.get('k')),
        await failureOf(() => offline.get('k')),
        await failureOf(() => sql`SELECT 1`),
      ];
      expect((errors[0] as Error).name).toBe('MaxRetriesPerRequestError');
      for (const err of errors) {
        expect(isUnavailable(err)).toBe(true);
        expect(toAppError(err)).toMatchObject({ code: 'UNAVAILABLE', status: 503, headers: { 'Retry-After': '1' } });
      }
    } finally {
      parked.disconnect();
      offline.disconnect();
      await sql.end({ timeout: 1 });
    }
  });

  it('answers 503 for any error a Redis server or Cluster raises on a request, never 500', async () => {
    // Queued until connected (blocking options), so the replies below are the server's own.
    const redis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'blocking');
    const port = await freePort();
    // A cluster whose seeds do not answer, asked with no offline queue: what a request meets mid-failover.
    const cluster = createRedis({ clusterNodes: [{ host: '127.0.0.1', port }] }, 'request');
    cluster.on('error', () => {});
    try {
      // Real ReplyErrors, as a cluster node or a full Redis answers them.
      const replies = await Promise.all(
        [
          "CROSSSLOT Keys in request don't hash to the same slot",
          'MOVED 3999 127.0.0.1:6381',
          'CLUSTERDOWN The cluster is down',
          "OOM command not allowed when used memory > 'maxmemory'.",
        ].map((reply) => failureOf(() => redis.eval(`return redis.error_reply(ARGV[1])`, 0, reply))),
      );
      const errors = [...replies, await failureOf(() => cluster.get('k'))];
      expect(errors.map((e) => (e as Error).name)).toEqual(['ReplyError', 'ReplyError', 'ReplyError', 'ReplyError', expect.any(String)]);
      for (const err of errors) expect(toAppError(err), String(err)).toMatchObject({ code: 'UNAVAILABLE', status: 503 });
    } finally {
      redis.disconnect();
      cluster.disconnect();
    }
  });

  it('leaves programming errors and other database errors as 500s', () => {
    expect(isUnavailable(new TypeError('x is undefined'))).toBe(false);
    expect(isUnavailable(Object.assign(new Error('duplicate key'), { code: '23505' }))).toBe(false);
    expect(toAppError(new TypeError('x'))).toBeUndefined();
  });

  it('gives GraphQL the UNAVAILABLE code for a resolver that hit an unreachable service, INTERNAL otherwise', () => {
    const down = new GraphQLError('connect ECONNREFUSED', {
      originalError: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
    });
    expect(formatGraphqlError(down).extensions.code).toBe('UNAVAILABLE');
    const bug = new GraphQLError('boom', { originalError: new TypeError('boom') });
    expect(formatGraphqlError(bug).extensions.code).toBe('INTERNAL');
    const known = new GraphQLError('nope', { originalError: new AppError('NOT_FOUND', 'nope') });
    expect(formatGraphqlError(known).extensions.code).toBe('NOT_FOUND');
  });
});

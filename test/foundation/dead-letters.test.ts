import { randomUUID } from 'node:crypto';
import { UnrecoverableError, Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enqueue, queuePrefix, queueFor } from '../../src/queues.js';
import { createRedis } from '../../src/redis.js';
import { runCli } from '../helpers/cli.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;
const jobIds: string[] = [];

/**
 * A real worker that refuses the next `n` ledger jobs for good, as the ledger worker does with
 * an event the database refuses: each goes straight to the failed set (the dead letter).
 */
async function refuseNext(n: number): Promise<void> {
  const connection = createRedis(s.config.REDIS_URL, 'blocking');
  let failed = 0;
  let allFailed!: () => void;
  const done = new Promise<void>((r) => (allFailed = r));
  const worker = new Worker(
    'ledger',
    async (job) => {
      throw new UnrecoverableError(`ledger refused event ${job.data.event.id}: the database refused its data (SQLSTATE 22P05)`);
    },
    { connection, prefix: queuePrefix(s.config.REDIS_PREFIX) },
  );
  worker.on('failed', () => ++failed === n && allFailed());
  await done;
  await worker.close();
  await connection.quit();
}

beforeAll(async () => {
  s = await startTestStack({ workers: false });
  a = await s.createApp();
  b = await s.createApp();
  for (const app of [a, b]) {
    const job = await enqueue(s.deps.queues, 'ledger', {
      event: { id: randomUUID(), app_id: app.appId, event_type: 'dead.one', payload: {}, edges: [], attachments: [] },
    });
    jobIds.push(job.id!);
  }
  await refuseNext(2);
});
afterAll(() => s.close());

const cli = (args: string[]) => runCli(s.env, args);
const lines = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, any>);

describe('dead letters (the failed set) through the operator CLI', () => {
  it('lists each dead-lettered job of a queue with its application, error, attempts and age', async () => {
    const r = await cli(['dead', 'list', '--queue', 'ledger']);
    expect(r.code).toBe(0);
    const listed = lines(r.stdout).sort((x, y) => jobIds.indexOf(x.id) - jobIds.indexOf(y.id));
    expect(listed).toEqual(
      [a, b].map((app, i) => ({
        queue: 'ledger',
        id: jobIds[i],
        apps: [app.appId],
        error: expect.stringContaining('SQLSTATE 22P05'),
        attempts: 1,
        age_s: expect.any(Number),
        failed_at: expect.stringMatching(/Z$/),
      })),
    );
    // Every queue is listed without --queue; only the ledger has dead letters here.
    expect(
      lines((await cli(['dead', 'list'])).stdout)
        .map((d) => d.id)
        .sort(),
    ).toEqual([...jobIds].sort());
  });

  it('requeues one with its attempts reset, discards another, and refuses an id that is not dead-lettered', async () => {
    const requeued = await cli(['dead', 'requeue', '--queue', 'ledger', jobIds[0]]);
    expect(lines(requeued.stdout)).toEqual([{ queue: 'ledger', id: jobIds[0], result: 'requeued' }]);
    const job = (await queueFor(s.deps.queues, 'ledger').getJob(jobIds[0]))!;
    expect(await job.getState()).toBe('waiting');
    expect(job.attemptsMade).toBe(0);

    const discarded = await cli(['dead', 'discard', '--queue', 'ledger', jobIds[1]]);
    expect(lines(discarded.stdout)).toEqual([{ queue: 'ledger', id: jobIds[1], result: 'discarded' }]);
    expect(await queueFor(s.deps.queues, 'ledger').getJob(jobIds[1])).toBeUndefined();

    // The requeued job is waiting, not dead: acting on it again is refused, as is an unknown id or queue.
    for (const args of [
      ['requeue', '--queue', 'ledger', jobIds[0]],
      ['discard', '--queue', 'ledger', 'nope'],
      ['list', '--queue', 'nope'],
    ]) {
      const r = await cli(['dead', ...args]);
      expect(r.code).toBe(2);
      expect(r.stderr).not.toBe('');
    }
    expect(lines((await cli(['dead', 'list', '--queue', 'ledger'])).stdout)).toEqual([]);
  });

  it('requeues every dead letter of a queue at once with --all', async () => {
    // The job requeued above failed again for good: it is the queue's only dead letter.
    await refuseNext(1);
    expect(lines((await cli(['dead', 'list', '--queue', 'ledger'])).stdout).map((d) => d.id)).toEqual([jobIds[0]]);
    const r = await cli(['dead', 'requeue', '--queue', 'ledger', '--all']);
    expect(lines(r.stdout)).toEqual([{ queue: 'ledger', requeued: 1 }]);
    expect(await (await queueFor(s.deps.queues, 'ledger').getJob(jobIds[0]))!.getState()).toBe('waiting');
  });
});

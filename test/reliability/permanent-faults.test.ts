import { randomUUID } from 'node:crypto';
import { QueueEvents, type Job } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queuePrefix, queueFor } from '../../src/queues.js';
import { createRedis, type Redis } from '../../src/redis.js';
import { startWorkerHost, type WorkerHost } from '../../workers/host.js';
import { startTestStack, type TestStack } from '../helpers/stack.js';

let s: TestStack;
let host: WorkerHost;
let events: QueueEvents;
let eventsConnection: Redis;
const runs = new Map<string, number>();

beforeAll(async () => {
  s = await startTestStack({ workers: false });
  await s.deps.sql`CREATE TABLE fault_probe (id int PRIMARY KEY)`;
  await s.deps.sql`INSERT INTO fault_probe VALUES (1)`;
  // A processor whose write PostgreSQL refuses: with bad data (class 22), or as a key already
  // taken (class 23, which a race can also cause and a retry can win).
  host = startWorkerHost(s.deps, [
    {
      queue: 'transcription',
      create: (deps) => async (job: Job) => {
        runs.set(job.id!, (runs.get(job.id!) ?? 0) + 1);
        if (job.data.event.event_type === 'probe.divide') await deps.sql`SELECT 1 / ${0}::int`;
        else await deps.sql`INSERT INTO fault_probe VALUES (1)`;
      },
    },
  ]);
  // Ours to close: BullMQ leaves a connection it was handed open.
  eventsConnection = createRedis(s.config.REDIS_URL, 'blocking');
  events = new QueueEvents('transcription', {
    connection: eventsConnection,
    prefix: queuePrefix(s.config.REDIS_PREFIX),
  });
  await events.waitUntilReady();
});
afterAll(async () => {
  await events.close();
  eventsConnection.disconnect();
  await host.close();
  await s.close();
});

async function runToEnd(kind: string): Promise<{ attemptsMade: number; failedReason: string; runs: number }> {
  const appId = randomUUID();
  const data = {
    app_id: appId,
    file_id: randomUUID(),
    event: { id: randomUUID(), app_id: appId, event_type: kind, payload: {}, edges: [], attachments: [] },
  };
  const job = await queueFor(s.deps.queues, 'transcription').add('transcription', data, {
    jobId: `probe-${randomUUID()}`,
    attempts: 3,
    backoff: 0,
  });
  await expect(job.waitUntilFinished(events, 20_000)).rejects.toThrow();
  const done = (await queueFor(s.deps.queues, 'transcription').getJob(job.id!))!;
  expect(await done.getState()).toBe('failed');
  return { attemptsMade: done.attemptsMade, failedReason: done.failedReason, runs: runs.get(job.id!) ?? 0 };
}

describe('a job whose own data PostgreSQL refuses', () => {
  it('goes to the dead letter on its first attempt when no retry can help (a data exception, SQLSTATE class 22)', async () => {
    const r = await runToEnd('probe.divide');
    expect(r).toMatchObject({ attemptsMade: 1, runs: 1 });
    expect(r.failedReason).toMatch(/^refused for good: the database refused its data: division by zero \(SQLSTATE 22012\)/);
  });

  it('is retried as usual on an integrity violation (class 23), which a race can cause', async () => {
    const r = await runToEnd('probe.duplicate');
    expect(r).toMatchObject({ attemptsMade: 3, runs: 3 });
    expect(r.failedReason).toMatch(/duplicate key/);
  });
});

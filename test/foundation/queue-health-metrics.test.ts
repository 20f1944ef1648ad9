import { randomUUID } from 'node:crypto';
import { UnrecoverableError, Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queuePrefix, queueFor } from '../../src/queues.js';
import { createRedis } from '../../src/redis.js';
import { eventually } from '../webhooks/receiver.js';
import { startTestStack, type TestStack } from '../helpers/stack.js';

const STUCK_MS = 3_000;
let s: TestStack;
beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger'], env: { JOB_STUCK_MS: String(STUCK_MS) } });
});
afterAll(() => s.close());

/** One scrape of /metrics, as Prometheus does it; returns the samples of `name` by their labels. */
async function scrape(name: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${s.base}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m && m[1] === name) out.set(m[2] ?? '', Number(m[3]));
  }
  return out;
}

describe('queue and ledger health in /metrics', () => {
  it('ledger_last_commit_age_seconds: seconds since this process last committed, reset by a commit', async () => {
    const a = await s.createApp();
    expect((await s.request('POST', '/v1/events', { auth: a, body: { event_type: 'm.one', payload: {} } })).status).toBe(201);
    const age = (await scrape('ledger_last_commit_age_seconds')).get('')!;
    expect(age).toBeGreaterThanOrEqual(0);
    expect(age).toBeLessThan(30);
  });

  it('queue_oldest_waiting_seconds: the age of the oldest waiting job per queue, 0 for an empty one', async () => {
    const queuedAt = Date.now() - 90_000;
    // The transcription queue has no worker in this test: its jobs wait.
    await queueFor(s.deps.queues, 'transcription').add('transcription', { n: 1 }, { jobId: `old-${randomUUID()}`, timestamp: queuedAt });
    await queueFor(s.deps.queues, 'transcription').add('transcription', { n: 2 }, { jobId: `new-${randomUUID()}` });
    const ages = await scrape('queue_oldest_waiting_seconds');
    expect(ages.get('queue="transcription"')).toBeGreaterThanOrEqual(90);
    expect(ages.get('queue="transcription"')).toBeLessThan(600);
    expect(ages.get('queue="inbound"')).toBe(0);
  });

  it('queue_stuck_jobs counts a job active past JOB_STUCK_MS; a failed-for-good job counts as a dead letter', async () => {
    const connection = createRedis(s.config.REDIS_URL, 'blocking');
    let release!: () => void;
    const hung = new Promise<void>((r) => (release = r));
    let activeNow!: () => void;
    const active = new Promise<void>((r) => (activeNow = r));
    // A real worker on a queue this stack does not run, hung on a promise that never settles (until the end).
    const worker = new Worker(
      'send',
      async (job) => {
        if (job.data.hang) {
          activeNow();
          await hung;
          return;
        }
        throw new UnrecoverableError('refused for good');
      },
      { connection, prefix: queuePrefix(s.config.REDIS_PREFIX), concurrency: 2, lockDuration: 60_000 },
    );
    try {
      await queueFor(s.deps.queues, 'send').add('send', { hang: true }, { jobId: `hang-${randomUUID()}` });
      await active;
      expect((await scrape('queue_stuck_jobs')).get('queue="send"')).toBe(0);
      const failed = new Promise<void>((r) => worker.once('failed', () => r()));
      await queueFor(s.deps.queues, 'send').add('send', { hang: false }, { jobId: `dead-${randomUUID()}`, attempts: 1 });
      await failed;
      // Past JOB_STUCK_MS the hung job counts as stuck (bounded wait, scraping as Prometheus would).
      await eventually(async () => (await scrape('queue_stuck_jobs')).get('queue="send"') === 1, STUCK_MS + 15_000, 250);
      expect((await scrape('queue_stuck_jobs')).get('queue="ledger"')).toBe(0);
      expect((await scrape('queue_jobs')).get('queue="send",state="failed"')).toBe(1);
    } finally {
      release();
      await worker.close();
      await connection.quit();
    }
  });
});

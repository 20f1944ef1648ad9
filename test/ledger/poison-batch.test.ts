import { randomUUID } from 'node:crypto';
import { QueueEvents, type Job } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reportChannels, subscribeCommitReports, type CommitReportSubscription } from '../../src/ledger/commit-reports.js';
import { createCommitWaiter, eventCommitted, type CommitOutcome } from '../../src/ledger/commit-waiter.js';
import { createLedgerSubmitter, type LedgerSubmitter } from '../../src/ledger/submit.js';
import { enqueue, JOBS, queuePrefix, type LedgerEvent, queueFor } from '../../src/queues.js';
import { createRedis, type Redis } from '../../src/redis.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

let s: TestStack;
let a: AppCredentials;
let b: AppCredentials;
let submitter: LedgerSubmitter;
let reports: CommitReportSubscription;
let events: QueueEvents;
let eventsConnection: Redis;

beforeAll(async () => {
  s = await startTestStack({ workers: ['ledger'] });
  a = await s.createApp();
  b = await s.createApp();
  const replyTo = randomUUID();
  const commits = createCommitWaiter<CommitOutcome>(s.deps.sql, undefined, eventCommitted);
  reports = subscribeCommitReports(s.config.redis, reportChannels(s.config), replyTo, s.deps, {
    commit: commits.settle,
    send: () => undefined,
  });
  await reports.ready;
  submitter = createLedgerSubmitter(s.deps, replyTo, commits);
  // Ours to close: BullMQ leaves a connection it was handed open.
  eventsConnection = createRedis(s.config.REDIS_URL, 'blocking');
  events = new QueueEvents('ledger', {
    connection: eventsConnection,
    prefix: queuePrefix(s.config.REDIS_PREFIX),
  });
  await events.waitUntilReady();
});
afterAll(async () => {
  await reports.close();
  await events.close();
  eventsConnection.disconnect();
  await s.close();
});

/**
 * An event past every check at the door that PostgreSQL still refuses: jsonb cannot hold U+0000
 * (SQLSTATE 22P05), and the ledger worker repairs it only in payloads and attachments.
 */
const poison = (appId: string): LedgerEvent => ({
  id: randomUUID(),
  app_id: appId,
  event_type: 'poison.\u0000',
  payload: {},
  edges: [],
  attachments: [],
});
const good = (appId: string, n: number): LedgerEvent => ({
  id: randomUUID(),
  app_id: appId,
  event_type: 'good.one',
  payload: { n },
  edges: [],
  attachments: [],
});

const storedIds = async (ids: string[]) =>
  (await s.deps.sql<{ id: string }[]>`SELECT id FROM events WHERE id = ANY(${ids}::uuid[])`).map((r) => r.id).sort();

/** Settles once the job has failed for good (or completed), by its queue's own events. */
async function finished(job: Job): Promise<{ state: string; attemptsMade: number; failedReason: string }> {
  await job.waitUntilFinished(events, 20_000).catch(() => {});
  const fresh = (await queueFor(s.deps.queues, 'ledger').getJob(job.id!))!;
  return { state: await fresh.getState(), attemptsMade: fresh.attemptsMade, failedReason: fresh.failedReason };
}

describe('a ledger batch holding one event PostgreSQL refuses', () => {
  it("commits every other application's event, answers the waiting POST 201, and refuses only the poison event", async () => {
    const ok = good(b.appId, 1);
    const bad = poison(a.appId);
    // Submitted in one turn: one ledger job carries both, so they share a group commit.
    const [okOutcome, badOutcome, post] = await Promise.all([
      submitter.submit(ok, 15_000),
      submitter.submit(bad, 15_000),
      s.request('POST', '/v1/events', { auth: b, body: { event_type: 'good.posted', payload: { n: 2 } } }),
    ]);
    expect(post.status).toBe(201);
    expect(okOutcome).toMatchObject({ seq: expect.any(Number) });
    // The waiting caller hears why at once instead of waiting out its bound.
    expect(badOutcome).toEqual({ refused: expect.stringMatching(/SQLSTATE 22P05/) });
    expect(await storedIds([ok.id, bad.id, post.json.id])).toEqual([ok.id, post.json.id].sort());

    // The job holding it fails for good on its first attempt (the dead letter), naming the event.
    const job = (await queueFor(s.deps.queues, 'ledger').getJob(JOBS.ledger.jobId({ events: [ok, bad] })))!;
    const outcome = await finished(job);
    expect(outcome).toMatchObject({ state: 'failed', attemptsMade: 1 });
    expect(outcome.failedReason).toContain(`event ${bad.id} (application ${a.appId})`);
    expect(outcome.failedReason).not.toContain(ok.id);
  });

  it('fails a lone poison job for good while jobs of the same batch commit', async () => {
    const bad = poison(a.appId);
    const oks = [good(a.appId, 3), good(b.appId, 4), good(b.appId, 5)];
    const jobs = await Promise.all([...oks.slice(0, 1), bad, ...oks.slice(1)].map((event) => enqueue(s.deps.queues, 'ledger', { event })));
    const outcomes = await Promise.all(jobs.map(finished));
    expect(outcomes.map((o) => o.state)).toEqual(['completed', 'failed', 'completed', 'completed']);
    expect(outcomes[1]).toMatchObject({ attemptsMade: 1, failedReason: expect.stringContaining('SQLSTATE 22P05') });
    expect(await storedIds([...oks.map((e) => e.id), bad.id])).toEqual(oks.map((e) => e.id).sort());
    // Application a's ledger keeps its order: positions are dense (the refused event took none).
    const seqs = (await s.deps.sql<{ seq: number }[]>`SELECT seq FROM events WHERE app_id = ${a.appId} ORDER BY seq`).map((r) =>
      Number(r.seq),
    );
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
  });

  it('refuses an event nested too deep to serialise (the 500 / stranded-write payload) while its batch-mates commit', async () => {
    const ok = good(b.appId, 6);
    const deep = good(a.appId, 7);
    // Queued held back, then given a payload nested 6,000 levels (as a producer that got it
    // into Redis would leave it: JSON.parse reads it, JSON.stringify overflows the stack).
    const job = await queueFor(s.deps.queues, 'ledger').add(
      'ledger',
      { events: [ok, deep] },
      { jobId: JOBS.ledger.jobId({ events: [ok, deep] }), delay: 600_000 },
    );
    const depth = 6_000;
    const deepJson = JSON.stringify({ events: [ok, { ...deep, payload: '\u0001' }] }).replace(
      '"\\u0001"',
      `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`,
    );
    await s.deps.redis.hset(`${queuePrefix(s.config.REDIS_PREFIX)}:ledger:${job.id}`, 'data', deepJson);
    await job.promote();
    const outcome = await finished(job);
    expect(outcome).toMatchObject({ state: 'failed', attemptsMade: 1 });
    expect(outcome.failedReason).toContain(`event ${deep.id} (application ${a.appId}): it is nested too deeply`);
    expect(await storedIds([ok.id, deep.id])).toEqual([ok.id]);
  });

  it('answers 400 VALIDATION_ERROR (not 500) for an event too deep to queue, while an event posted beside it is answered 201', async () => {
    const depth = 5_000;
    const deepBody = `{"event_type":"deep.z","payload":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}`;
    const [deepPost, okPost] = await Promise.all([
      s.request('POST', '/v1/events', { auth: a, body: deepBody }),
      s.request('POST', '/v1/events', { auth: b, body: { event_type: 'good.beside', payload: {} } }),
    ]);
    expect(okPost.status).toBe(201);
    expect(deepPost.status).toBe(400);
    expect(deepPost.json.error.code).toBe('VALIDATION_ERROR');
  });
});

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTelegramFake, type TelegramFake } from '../../chaos/fakes.js';
import type { Job } from 'bullmq';
import { claimSends } from '../../src/messages/delivery.js';
import { enqueue, type JobData, queueFor } from '../../src/queues.js';
import { createRedis } from '../../src/redis.js';
import { sendProcessor } from '../../workers/send.js';
import { createWorkerServices } from '../../workers/services.js';
import { connect, eventually } from '../helpers/connections.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

/**
 * The send path's batches: the sends a web process accepts in one turn are recorded by one
 * statement and sent by one batch job, which claims each message under a lease before calling
 * the platform and records `sent` together with its message.outbound event.
 */
let s: TestStack;
let a: AppCredentials;
let tg: TelegramFake;
let conn: { id: string };

// A raised per-recipient budget (PLATFORM_RATE_BUDGETS), so one recipient can take a burst.
const BUDGETS = { TELEGRAM: { connection: { rate: 1000, perMs: 1000, burst: 200 }, recipient: { rate: 1000, perMs: 1000, burst: 200 } } };

beforeAll(async () => {
  tg = await startTelegramFake();
  s = await startTestStack({
    workers: ['send', 'ledger'],
    env: {
      SEND_WAIT_MS: '0',
      RATE_LIMIT_PER_MINUTE: '100000',
      PLATFORM_TIMEOUT_MS: '1000',
      PLATFORM_RATE_BUDGETS: JSON.stringify(BUDGETS),
    },
  });
  a = await s.createApp();
  conn = await connect(s, a, 'TELEGRAM', { bot_token: '777010:batch-bot_abcdef', api_base_url: tg.base });
});
afterAll(async () => {
  await s?.close();
  await tg?.stop();
});

/** Records `texts` as sends to `to` in one turn of the event loop, as concurrent requests would be. */
async function recordInOneTurn(to: string, texts: string[]): Promise<string[]> {
  const ids = texts.map(() => randomUUID());
  await Promise.all(
    ids.map((id, i) =>
      s.web.services.recorder({ id, appId: a.appId, connectionId: conn.id, to, text: texts[i], options: {}, fileIds: [] }),
    ),
  );
  return ids;
}

async function sendJobsFor(ids: string[]) {
  const jobs = await queueFor(s.deps.queues, 'send').getJobs(['completed', 'failed', 'active', 'waiting', 'delayed']);
  const mine = new Set(ids);
  return {
    batches: jobs.filter((j) => j.data.kind === 'batch' && j.data.messages.some((m: { id: string }) => mine.has(m.id))),
    single: jobs.filter((j) => j.data.kind !== 'batch' && mine.has(j.data.message_id)),
  };
}

describe('a batch of sends', () => {
  it('of 50 messages to one recipient arrives at the platform in order, through one statement and one batch job', async () => {
    const texts = Array.from({ length: 50 }, (_, i) => `in order ${i}`);
    const ids = await recordInOneTurn('7001', texts);
    await eventually(async () => texts.every((t) => tg.accepted.has(t)), 20_000, '50 sends at the platform');
    expect([...tg.accepted.keys()].filter((t) => t.startsWith('in order '))).toEqual(texts);
    expect(texts.map((t) => tg.accepted.get(t))).toEqual(texts.map(() => 1));
    // One statement handed out consecutive sequence numbers in arrival order.
    const rows = await s.deps.sql<{ id: string; recipient_seq: string }[]>`
      SELECT id, recipient_seq FROM outbound_messages WHERE id = ANY(${ids}::uuid[]) ORDER BY recipient_seq`;
    expect(rows.map((r) => r.id)).toEqual(ids);
    expect(Number(rows[49].recipient_seq) - Number(rows[0].recipient_seq)).toBe(49);
    const jobs = await sendJobsFor(ids);
    expect(jobs.batches).toHaveLength(1);
    expect(jobs.single).toHaveLength(0);
    // The ledger lists them in the order the platform got them.
    const events = await eventually(async () => {
      const e = await s.deps.sql<{ id: string }[]>`
        SELECT id FROM events WHERE app_id = ${a.appId} AND id = ANY(${ids}::uuid[]) AND event_type = 'message.outbound' ORDER BY seq`;
      return e.length === 50 ? e : undefined;
    });
    expect(events.map((e) => e.id)).toEqual(ids);
  });

  it('and a per-message job racing for the same message make one platform call between them (the claim and its lease)', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let reached!: () => void;
    const atPlatform = new Promise<void>((r) => (reached = r));
    tg.onAccept = async (text) => {
      if (text !== 'raced') return;
      reached();
      await held; // the call stays in flight while the other job tries
    };
    try {
      const id = randomUUID();
      // The batch job (from the recorder) and the message's own job start together.
      await Promise.all([
        s.web.services.recorder({ id, appId: a.appId, connectionId: conn.id, to: '7002', text: 'raced', options: {}, fileIds: [] }),
        new Promise((r) => setImmediate(r)).then(() => enqueue(s.deps.queues, 'send', { message_id: id, app_id: a.appId })),
      ]);
      await atPlatform;
      // Whichever claimed second found the message claimed: it calls nothing while the call is in flight.
      const [during] = await s.deps.sql<{ status: string; claimed_by: string | null }[]>`
        SELECT status, claimed_by FROM outbound_messages WHERE id = ${id}`;
      expect(during).toMatchObject({ status: 'sending', claimed_by: expect.any(String) });
      release();
      await eventually(async () => {
        const [m] = await s.deps.sql<{ status: string }[]>`SELECT status FROM outbound_messages WHERE id = ${id}`;
        return m.status === 'sent';
      });
      // The message's own job has run to its end (it waited for the claim, then found it sent).
      await eventually(
        async () => {
          const job = await queueFor(s.deps.queues, 'send').getJob(`send-${id}`);
          return job && (await job.getState()) === 'completed';
        },
        15_000,
        'the per-message job to finish',
      );
      expect(tg.accepted.get('raced')).toBe(1);
      const events = await s.deps.sql`SELECT 1 FROM events WHERE app_id = ${a.appId} AND id = ${id}`;
      expect(events).toHaveLength(1);
    } finally {
      tg.onAccept = undefined;
      release();
    }
  });

  it('hands a message to one claimer only, however many claim it at once (the claim itself, under the jobs)', async () => {
    // No job takes it meanwhile: the claimers here are the only ones.
    await queueFor(s.deps.queues, 'send').pause();
    const [id] = await recordInOneTurn('7003', ['claimed at once']);
    try {
      const claims = [randomUUID(), randomUUID(), randomUUID()];
      const won = await Promise.all(claims.map((claim) => claimSends(s.deps, a.appId, [id], claim, 60_000)));
      expect(won.map((w) => w.has(id)).filter(Boolean)).toHaveLength(1);
      const [row] = await s.deps.sql<{ status: string; claimed_by: string; attempts: number }[]>`
        SELECT status, claimed_by, attempts FROM outbound_messages WHERE id = ${id}`;
      expect(row).toEqual({ status: 'sending', claimed_by: claims[won.findIndex((w) => w.has(id))], attempts: 1 });
    } finally {
      // Settled here, so the batch job finds nothing to send once the queue runs again.
      await s.deps.sql`
        UPDATE outbound_messages SET status = 'failed', finished_at = now(), claimed_by = NULL, lease_until = NULL WHERE id = ${id}`;
      await queueFor(s.deps.queues, 'send').resume();
    }
  });

  it('gives its claims back when it fails before any platform call, so its retry sends them (no DELIVERY_UNCERTAIN)', async () => {
    await queueFor(s.deps.queues, 'send').pause();
    const services = createWorkerServices(s.deps, ['send']);
    // Redis refuses the budget scripts: the batch fails after its claim, before any call.
    const unreachable = createRedis('redis://127.0.0.1:1', 'request', { lazyConnect: true, retryStrategy: () => null });
    unreachable.on('error', () => {});
    try {
      const [id] = await recordInOneTurn('7004', ['claimed, then Redis failed']);
      const [batch] = (await sendJobsFor([id])).batches;
      const run = sendProcessor.create({ ...s.deps, redis: unreachable }, services);
      await expect(run({ data: batch.data } as Job<JobData<'send'>>, undefined)).rejects.toThrow();
      const [row] = await s.deps.sql<{ status: string; claimed_by: string | null; attempts: number }[]>`
        SELECT status, claimed_by, attempts FROM outbound_messages WHERE id = ${id}`;
      expect(row).toEqual({ status: 'queued', claimed_by: null, attempts: 0 });
    } finally {
      unreachable.disconnect();
      await services.close();
      await queueFor(s.deps.queues, 'send').resume();
    }
    // The batch job itself (still waiting) now runs with a working Redis and sends it once.
    await eventually(async () => tg.accepted.get('claimed, then Redis failed') === 1, 10_000, 'the message at the platform');
  });

  it('never shows `sent` without its message.outbound event, nor the event without `sent`', async () => {
    const b = await s.createApp();
    const c = await connect(s, b, 'TELEGRAM', { bot_token: '777011:atomic-bot_abcdef', api_base_url: tg.base });
    let sending = true;
    const samples: { sent_without_event: number; event_without_sent: number; sent: number }[] = [];
    // Each sample is one statement: one snapshot of both tables.
    const sampler = (async () => {
      while (sending) {
        const [row] = await s.deps.sql<{ sent_without_event: number; event_without_sent: number; sent: number }[]>`
          SELECT
            (SELECT count(*)::int FROM outbound_messages m WHERE m.app_id = ${b.appId} AND m.status = 'sent'
                AND NOT EXISTS (SELECT 1 FROM events e WHERE e.app_id = m.app_id AND e.id = m.id)) AS sent_without_event,
            (SELECT count(*)::int FROM events e WHERE e.app_id = ${b.appId} AND e.event_type = 'message.outbound'
                AND NOT EXISTS (SELECT 1 FROM outbound_messages m WHERE m.id = e.id AND m.status = 'sent')) AS event_without_sent,
            (SELECT count(*)::int FROM outbound_messages m WHERE m.app_id = ${b.appId} AND m.status = 'sent') AS sent`;
        samples.push(row);
      }
    })();
    const posts = Array.from({ length: 200 }, (_, i) =>
      s.request('POST', '/v1/messages', {
        auth: b,
        body: { platform_connection_id: c.id, to_external_id: String(8000 + (i % 50)), message: `atomic ${i}` },
      }),
    );
    expect((await Promise.all(posts)).map((r) => r.status)).toEqual(posts.map(() => 202));
    await eventually(
      async () => {
        const [m] = await s.deps.sql<
          { n: number }[]
        >`SELECT count(*)::int AS n FROM outbound_messages WHERE app_id = ${b.appId} AND status = 'sent'`;
        return m.n === 200;
      },
      30_000,
      '200 sent',
    );
    sending = false;
    await sampler;
    // The samples saw the sends progress, and never one half of a send without the other.
    expect(samples.length).toBeGreaterThan(5);
    expect(new Set(samples.map((x) => x.sent)).size).toBeGreaterThan(2);
    expect(samples.filter((x) => x.sent_without_event > 0 || x.event_without_sent > 0)).toEqual([]);
  });
});

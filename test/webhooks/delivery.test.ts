import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeEvents } from '../../src/ledger/write.js';
import { enqueue, JOBS, queueFor } from '../../src/queues.js';
import { enqueueFirstAttemptsSafetyNet } from '../../src/webhooks/delivery-queue.js';
import { publishSubscriptionsChanged } from '../../src/webhooks/subscription-cache.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { eventually, startReceiver, type Received, type Receiver } from './receiver.js';

let s: TestStack;
let a: AppCredentials;
const receivers: Receiver[] = [];

beforeAll(async () => {
  s = await startTestStack({
    workers: ['ledger', 'webhook'],
    env: { WEBHOOK_RETRY_DELAYS_MS: '0,300,600', WEBHOOK_TIMEOUT_MS: '800', WEBHOOK_DISABLE_AFTER: '2' },
  });
  a = await s.createApp();
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await s.close();
});

async function receiver(): Promise<Receiver> {
  const r = await startReceiver();
  receivers.push(r);
  return r;
}

async function subscribe(auth: AppCredentials, url: string, patterns: string[], extra: Record<string, unknown> = {}) {
  const r = await s.request('POST', '/v1/webhook-subscriptions', {
    auth,
    body: { name: 'hook', target_url: url, event_patterns: patterns, ...extra },
  });
  expect(r.status).toBe(201);
  return r.json as { id: string; secret?: string };
}

const emit = async (auth: AppCredentials, eventType: string, payload: Record<string, unknown> = {}) => {
  const r = await s.request('POST', '/v1/events', { auth, body: { event_type: eventType, payload } });
  expect(r.status).toBe(201);
  return r.json as { id: string; created_at: string; cursor: string };
};

/** An independent verifier of the signature scheme (docs/webhook-receiver.md): HMAC-SHA256 over `<timestamp>.<raw body>`, any listed signature. */
function verifyService(secret: string, r: Received): boolean {
  const ts = String(r.headers['x-service-timestamp']);
  if (Math.abs(Date.now() / 1000 - Number(ts)) > 300) return false;
  const expected = Buffer.from(createHmac('sha256', secret).update(`${ts}.${r.body}`).digest('hex'));
  return String(r.headers['x-service-signature'])
    .split(' ')
    .some((sig) => {
      const hex = Buffer.from(sig.replace(/^sha256=/, ''));
      return hex.length === expected.length && timingSafeEqual(hex, expected);
    });
}

const logsOf = async (subId: string) =>
  (await s.request('GET', `/v1/webhook-subscriptions/${subId}/deliveries?limit=200`, { auth: a })).json.data as any[];

describe('signed deliveries', () => {
  it('delivers the documented body, signed so both an independent verifier and standardwebhooks accept it', async () => {
    const rx = await receiver();
    const sub = await subscribe(a, rx.url, ['order.*']);
    expect(sub.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const ev = await emit(a, 'order.placed', { total: 5, nested: { z: 1, a: 2 } });
    await emit(a, 'invoice.sent');
    const [got] = await rx.waitFor(1);
    expect(got.json).toEqual({
      id: got.headers['x-service-delivery-id'],
      subscription_id: sub.id,
      event_id: ev.id,
      event_type: 'order.placed',
      app_id: a.appId,
      payload: { total: 5, nested: { z: 1, a: 2 } },
      edges: {},
      created_at: ev.created_at,
      timestamp: expect.stringMatching(/Z$/),
    });
    expect(Object.keys(got.json)).toEqual([
      'id',
      'subscription_id',
      'event_id',
      'event_type',
      'app_id',
      'payload',
      'edges',
      'created_at',
      'timestamp',
    ]);
    expect(verifyService(sub.secret!, got)).toBe(true);
    expect(verifyService('whsec_someoneelse', got)).toBe(false);
    expect(new Webhook(sub.secret!).verify(got.body, got.headers as Record<string, string>)).toEqual(got.json);
    expect(got.headers['x-service-retry-count']).toBeUndefined();
    // Only the matching event was delivered.
    await emit(a, 'order.shipped');
    await rx.waitFor(2);
    expect(rx.received.map((r) => r.json.event_type)).toEqual(['order.placed', 'order.shipped']);
  });

  it('signs with a client-given secret and omits the Standard Webhooks headers for a non-whsec secret', async () => {
    const rx = await receiver();
    const secret = 'my-own-secret-of-some-length';
    const sub = await subscribe(a, rx.url, ['given.secret'], { secret });
    expect(sub.secret).toBeUndefined();
    await emit(a, 'given.secret');
    const [got] = await rx.waitFor(1);
    expect(verifyService(secret, got)).toBe(true);
    expect(got.headers['webhook-signature']).toBeUndefined();
  });

  it('carries edges keyed by relation and platform_connection_id when the event has them', async () => {
    const rx = await receiver();
    await subscribe(a, rx.url, ['edge.test']);
    const [pu] = await s.deps.sql<
      { id: string }[]
    >`INSERT INTO platform_users (app_id, platform, external_id, name) VALUES (${a.appId}, 'TELEGRAM', '99', 'Bo') RETURNING id`;
    const r = await s.request('POST', '/v1/events', {
      auth: a,
      body: {
        event_type: 'edge.test',
        payload: {},
        edges: [{ edge_type: 'placed_by', target_node_type: 'platform_user', target_node_id: pu.id }],
      },
    });
    expect(r.status).toBe(201);
    const [got] = await rx.waitFor(1);
    expect(got.json.edges).toEqual({ placed_by: { platform_user_id: pu.id, external_id: '99', name: 'Bo' } });
  });
});

describe('retries', () => {
  it('retries 5xx and timeouts on the schedule with retry headers and an identical body, then delivers', async () => {
    const rx = await receiver();
    rx.answer({ status: 503, body: 'down' }, { status: 200, delayMs: 1500 }, { status: 204 });
    const sub = await subscribe(a, rx.url, ['retry.ok']);
    await emit(a, 'retry.ok');
    const got = await rx.waitFor(3);
    expect(new Set(got.map((g) => g.body)).size).toBe(1);
    expect(new Set(got.map((g) => g.headers['x-service-delivery-id'])).size).toBe(1);
    expect(got[0].headers['x-service-retry-count']).toBeUndefined();
    expect(got[1].headers['x-service-retry-count']).toBe('1');
    expect(got[2].headers['x-service-retry-count']).toBe('2');
    expect(got[2].headers['x-service-original-timestamp']).toBe(got[0].headers['x-service-timestamp']);
    for (const g of got) expect(verifyService(sub.secret!, g)).toBe(true);
    // Backoff: ~300 ms (±10%) before attempt 2, ~600 ms after attempt 2 ended (800 ms timeout).
    const logs = await eventually(async () => {
      const l = await logsOf(sub.id);
      return l.length === 3 && l;
    });
    expect(got[1].at - got[0].at).toBeGreaterThanOrEqual(260);
    expect(got[2].at - got[1].at).toBeGreaterThanOrEqual(800 + 530);

    expect(logs.map((l) => [l.attempt_count, l.status, l.status_code])).toEqual([
      [3, 'delivered', 204],
      [2, 'retrying', null],
      [1, 'retrying', 503],
    ]);
    expect(logs[1].error_message).toMatch(/no complete answer within 800 ms/);
    expect(logs[2].response_body).toBe('down');
    expect(logs[0].request_body).toBe(got[0].body);
    expect(typeof logs[0].duration).toBe('number');
    const [d] = await s.deps.sql`SELECT status, attempt_count FROM webhook_deliveries WHERE subscription_id = ${sub.id}`;
    expect(d).toEqual({ status: 'delivered', attempt_count: 3 });
  });

  it("logs each attempt's headers as sent, the receiver's response headers, and when the next attempt is due", async () => {
    const rx = await receiver();
    rx.answer({ status: 503, body: 'down', headers: { 'x-receiver': 'busy' } }, { status: 503 }, { status: 204 });
    const sub = await subscribe(a, rx.url, ['attempt.detail']);
    await emit(a, 'attempt.detail');
    const got = await rx.waitFor(3);
    const logs = await eventually(async () => {
      const l = await logsOf(sub.id);
      return l.length === 3 && l;
    });
    const [third, second, first] = logs;
    for (const [log, req] of [
      [first, got[0]],
      [second, got[1]],
      [third, got[2]],
    ] as const) {
      for (const name of ['x-service-signature', 'x-service-timestamp', 'x-service-delivery-id', 'content-type', 'user-agent'])
        expect(log.request_headers[name], name).toBe(req.headers[name]);
    }
    expect(third.request_headers['x-service-retry-count']).toBe('2');
    expect(first.response_headers['x-receiver']).toBe('busy');
    // Each retry was due when its log said (~300 ms, then ~600 ms, ±10%), and made right then:
    // the first attempt's from the in-process path, the second's from the queue's backoff.
    for (const [log, at, before, next, delay] of [
      [first, got[0].at, 0, got[1].at, 300],
      [second, got[1].at, 1, got[2].at, 600],
    ] as const) {
      const due = Date.parse(log.next_retry_at);
      expect(due - at, `attempt ${before + 1}`).toBeGreaterThanOrEqual(delay * 0.9 - 50);
      expect(due, `attempt ${before + 1}`).toBeLessThanOrEqual(next + 50);
      expect(next - due).toBeLessThan(1000);
    }
    expect(third.next_retry_at).toBeNull();
  });

  it('marks a delivery failed after the last attempt, counting a slow 2xx as a failure', async () => {
    const rx = await receiver();
    rx.answer({ status: 500 }, { status: 500 }, { status: 200, delayMs: 1200 });
    const sub = await subscribe(a, rx.url, ['retry.fail']);
    await emit(a, 'retry.fail');
    await rx.waitFor(3);
    const logs = await eventually(async () => {
      const l = await logsOf(sub.id);
      return l.length === 3 && l;
    });
    expect(logs.map((l) => [l.attempt_count, l.status])).toEqual([
      [3, 'failed'],
      [2, 'retrying'],
      [1, 'retrying'],
    ]);
    expect(logs[0].error_message).toMatch(/no complete answer/);
    const [d] = await s.deps.sql`SELECT status FROM webhook_deliveries WHERE subscription_id = ${sub.id}`;
    expect(d.status).toBe('failed');
    // No fourth attempt.
    await new Promise((r) => setTimeout(r, 900));
    expect(rx.received).toHaveLength(3);
  });

  it("honours a receiver's longer Retry-After on 429, clamped to twice the scheduled delay", async () => {
    const rx = await receiver();
    rx.answer({ status: 429, headers: { 'retry-after': '1' } }, { status: 200 });
    await subscribe(a, rx.url, ['retry.after']);
    await emit(a, 'retry.after');
    const got = await rx.waitFor(2);
    // Scheduled 300 ms, asked 1000 ms, clamped to 600 ms (±10%).
    const gap = got[1].at - got[0].at;
    expect(gap).toBeGreaterThanOrEqual(530);
    expect(gap).toBeLessThan(1000);
  });
});

describe('redirects', () => {
  it('never follows a redirect: a 3xx is a failed attempt', async () => {
    const rx = await receiver();
    const elsewhere = await receiver();
    rx.answer({ status: 307, headers: { location: elsewhere.url } });
    const sub = await subscribe(a, rx.url, ['redirect.me']);
    await emit(a, 'redirect.me');
    await rx.waitFor(3);
    const logs = await eventually(async () => {
      const l = await logsOf(sub.id);
      return l.length === 3 && l;
    });
    expect(logs.map((l) => l.status_code)).toEqual([307, 307, 307]);
    expect(logs[0].status).toBe('failed');
    expect(elsewhere.received).toHaveLength(0);
  });
});

describe('at-least-once without duplicates', () => {
  it('queues nothing twice when the ledger job for an event runs again, even after its delivery job is gone', async () => {
    const rx = await receiver();
    const sub = await subscribe(a, rx.url, ['once.only']);
    const ev = await emit(a, 'once.only');
    await rx.waitFor(1);
    await eventually(
      async () => (await s.deps.sql`SELECT 1 FROM webhook_deliveries WHERE event_id = ${ev.id} AND status = 'delivered'`).length === 1,
    );
    const [row] = await s.deps.sql`SELECT payload FROM events WHERE id = ${ev.id}`;
    const replayLedgerJob = (n: number) =>
      queueFor(s.deps.queues, 'ledger').add(
        'ledger',
        { event: { id: ev.id, app_id: a.appId, event_type: 'once.only', payload: row.payload, edges: [], attachments: [] } },
        { jobId: `replay-${n}-${ev.id}` },
      );
    // The in-process first attempts' safety net: one delayed job per commit batch (here, of this
    // event alone), removed once the outcome is written.
    const safetyNet = JOBS.webhook.jobId({ kind: 'first-attempts-safety-net', events: [{ event_id: ev.id, app_id: a.appId }] });
    const webhookQueue = queueFor(s.deps.queues, 'webhook');
    await eventually(async () => (await webhookQueue.getJobState(safetyNet)) === 'unknown');
    // The ledger job runs again, twice: its first attempts find the delivery and send nothing.
    for (const n of [1, 2]) {
      await replayLedgerJob(n);
      await eventually(async () => (await queueFor(s.deps.queues, 'ledger').getJobState(`replay-${n}-${ev.id}`)) === 'completed');
    }
    // The safety net runs as after a crash (now, instead of after its delay): it sends nothing either.
    await eventually(async () => (await webhookQueue.getJobState(safetyNet)) === 'unknown');
    await enqueueFirstAttemptsSafetyNet(s.deps, [{ event_id: ev.id, app_id: a.appId }], 1);
    await eventually(async () => (await webhookQueue.getJobState(safetyNet)) === 'completed');
    const marker = await emit(a, 'once.only');
    await rx.waitFor(2);
    await new Promise((r) => setTimeout(r, 200));
    expect(rx.received.map((r) => r.json.event_id)).toEqual([ev.id, marker.id]);
    const [{ n }] = await s.deps.sql`SELECT count(*)::int AS n FROM webhook_deliveries WHERE subscription_id = ${sub.id}`;
    expect(n).toBe(2);
  });
});

describe('jobs queued by an older release', () => {
  it('still delivers an event whose first-attempts job has no kind, under the same job id', async () => {
    const rx = await receiver();
    const sub = await subscribe(a, rx.url, ['legacy.shape']);
    const ev = { id: randomUUID(), app_id: a.appId, event_type: 'legacy.shape', payload: {}, edges: [], attachments: [] };
    await writeEvents(s.deps.sql, [ev]);
    // The shape and id the release before `kind` queued.
    const jobId = `we-${ev.id}`;
    expect(JOBS.webhook.jobId({ kind: 'first-attempts', event_id: ev.id, app_id: a.appId })).toBe(jobId);
    await queueFor(s.deps.queues, 'webhook').add('first-attempts', { event_id: ev.id, app_id: a.appId }, { jobId, attempts: 8 });
    const [got] = await rx.waitFor(1);
    expect(got.json).toMatchObject({ event_id: ev.id, subscription_id: sub.id });
    await eventually(async () => (await queueFor(s.deps.queues, 'webhook').getJobState(jobId)) === 'completed');
    // A repeat under the catalog's (tagged) job is dropped by its id.
    await enqueue(s.deps.queues, 'webhook', { kind: 'first-attempts', event_id: ev.id, app_id: a.appId }, {}, s.deps.config);
    expect(await queueFor(s.deps.queues, 'webhook').getJobState(jobId)).toBe('completed');
  });
});

describe('first attempts safety net', () => {
  it('makes the first attempts a commit batch never got (its process died), once, whatever batch it comes with', async () => {
    const rx = await receiver();
    const sub = await subscribe(a, rx.url, ['net.*']);
    // Committed without the after-commit hook: as if the process died before its first attempts.
    const lost = { id: randomUUID(), app_id: a.appId, event_type: 'net.lost', payload: { n: 1 }, edges: [], attachments: [] };
    const sent = { id: randomUUID(), app_id: a.appId, event_type: 'net.sent', payload: { n: 2 }, edges: [], attachments: [] };
    await writeEvents(s.deps.sql, [lost, sent]);
    // First `sent` gets its delivery (as in process), so that later only `lost` is missing.
    await enqueueFirstAttemptsSafetyNet(s.deps, [{ event_id: sent.id, app_id: a.appId }], 1);
    const [first] = await rx.waitFor(1);
    expect(first.json.event_id).toBe(sent.id);
    await eventually(
      async () => (await s.deps.sql`SELECT 1 FROM webhook_deliveries WHERE event_id = ${sent.id} AND status = 'delivered'`).length === 1,
    );

    await enqueueFirstAttemptsSafetyNet(
      s.deps,
      [
        { event_id: lost.id, app_id: a.appId },
        { event_id: sent.id, app_id: a.appId },
      ],
      1,
    );
    const got = await rx.waitFor(2);
    expect(got[1].json).toMatchObject({ event_id: lost.id, subscription_id: sub.id, event_type: 'net.lost', payload: { n: 1 } });
    // The same batch again (a replayed commit) and another batch holding both: nothing is sent twice.
    const both = JOBS.webhook.jobId({
      kind: 'first-attempts-safety-net',
      events: [
        { event_id: lost.id, app_id: a.appId },
        { event_id: sent.id, app_id: a.appId },
      ],
    });
    await eventually(async () => (await queueFor(s.deps.queues, 'webhook').getJobState(both)) === 'completed');
    await enqueueFirstAttemptsSafetyNet(
      s.deps,
      [
        { event_id: sent.id, app_id: a.appId },
        { event_id: lost.id, app_id: a.appId },
      ],
      1,
    );
    await queueFor(s.deps.queues, 'webhook').remove(both);
    await enqueueFirstAttemptsSafetyNet(
      s.deps,
      [
        { event_id: lost.id, app_id: a.appId },
        { event_id: sent.id, app_id: a.appId },
      ],
      1,
    );
    await eventually(async () => (await queueFor(s.deps.queues, 'webhook').getJobState(both)) === 'completed');
    // A job completes only after its sends were answered, so any repeat would have arrived by now.
    expect(rx.received.map((r) => r.json.event_id)).toEqual([sent.id, lost.id]);
    const [{ n }] = await s.deps
      .sql`SELECT count(*)::int AS n FROM webhook_deliveries WHERE subscription_id = ${sub.id} AND status = 'delivered'`;
    expect(n).toBe(2);
  });
});

describe('replay and retry', () => {
  it('replays matching events after a cursor, skips live ones, and re-sends finished ones with the same body', async () => {
    const rx = await receiver();
    const sub = await subscribe(a, rx.url, ['replay.*']);
    const before = await emit(a, 'replay.zero');
    await rx.waitFor(1);
    const e1 = await emit(a, 'replay.one');
    await emit(a, 'other.type');
    const e2 = await emit(a, 'replay.two');
    const first = await rx.waitFor(3);
    await eventually(
      async () =>
        (await s.deps.sql`SELECT 1 FROM webhook_deliveries WHERE subscription_id = ${sub.id} AND status = 'delivered'`).length === 3,
    );
    const r = await s.request('POST', `/v1/webhook-subscriptions/${sub.id}/replay`, { auth: a, body: { since: before.cursor } });
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ queued: 2, truncated: false });
    const all = await rx.waitFor(5);
    const again = all.slice(3);
    expect(again.map((g) => g.json.event_id).sort()).toEqual([e1.id, e2.id].sort());
    for (const g of again) expect(g.body).toBe(first.find((f) => f.json.event_id === g.json.event_id)!.body);
    // By time, covering everything: e.g. from before the first event.
    const byTime = await s.request('POST', `/v1/webhook-subscriptions/${sub.id}/replay`, {
      auth: a,
      body: { since: '2000-01-01T00:00:00Z' },
    });
    expect(byTime.json.queued + byTime.json.already_queued).toBe(3);
    const bad = await s.request('POST', `/v1/webhook-subscriptions/${sub.id}/replay`, { auth: a, body: { since: 'yesterday' } });
    expect(bad.status).toBe(400);
  });

  it('re-sends a failed delivery on request and refuses one that is not failed', async () => {
    const rx = await receiver();
    rx.answer({ status: 500 });
    const sub = await subscribe(a, rx.url, ['manual.retry']);
    await emit(a, 'manual.retry');
    await rx.waitFor(3);
    const [d] = await eventually(async () => {
      const rows = await s.deps.sql<
        { id: string; status: string }[]
      >`SELECT id, status FROM webhook_deliveries WHERE subscription_id = ${sub.id} AND status = 'failed'`;
      return rows.length > 0 && rows;
    });
    rx.answer({ status: 200 });
    const r = await s.request('POST', `/v1/webhook-deliveries/${d.id}/retry`, { auth: a });
    expect(r.status).toBe(202);
    const got = await rx.waitFor(4);
    expect(got[3].headers['x-service-retry-count']).toBe('3');
    await eventually(
      async () => (await s.deps.sql`SELECT 1 FROM webhook_deliveries WHERE id = ${d.id} AND status = 'delivered'`).length > 0,
    );
    const again = await s.request('POST', `/v1/webhook-deliveries/${d.id}/retry`, { auth: a });
    expect(again.status).toBe(409);
    expect(again.json.error.code).toBe('CONFLICT');
  });
});

describe('endpoint health', () => {
  it('accumulates nothing while paused and does not flood on resume', async () => {
    const rx = await receiver();
    const sub = await subscribe(a, rx.url, ['pause.*']);
    const p = await s.request('PATCH', `/v1/webhook-subscriptions/${sub.id}`, { auth: a, body: { status: 'PAUSED' } });
    expect(p.json.status).toBe('PAUSED');
    await emit(a, 'pause.during');
    await emit(a, 'pause.during');
    const g = await s.gql(a, `mutation($id: ID!) { updateWebhookSubscription(id: $id, status: ACTIVE) { id status } }`, { id: sub.id });
    expect(g.json.data.updateWebhookSubscription.status).toBe('ACTIVE');
    const after = await emit(a, 'pause.after');
    await rx.waitFor(1);
    await new Promise((r) => setTimeout(r, 300));
    expect(rx.received.map((r) => r.json.event_id)).toEqual([after.id]);
    const [{ n }] = await s.deps.sql`SELECT count(*)::int AS n FROM webhook_deliveries WHERE subscription_id = ${sub.id}`;
    expect(n).toBe(1);
  });

  it('disables a subscription after WEBHOOK_DISABLE_AFTER failed deliveries and records system.webhook_disabled', async () => {
    const rx = await receiver();
    rx.answer({ status: 500 });
    const sub = await subscribe(a, rx.url, ['flaky.*']);
    const watcher = await receiver();
    await subscribe(a, watcher.url, ['system.*']);
    await emit(a, 'flaky.one');
    await emit(a, 'flaky.two');
    const [notice] = await watcher.waitFor(1, undefined, 15_000);
    expect(notice.json.event_type).toBe('system.webhook_disabled');
    expect(notice.json.payload).toMatchObject({ subscription_id: sub.id, consecutive_failures: 2 });
    const got = await s.request('GET', `/v1/webhook-subscriptions/${sub.id}`, { auth: a });
    expect(got.json.status).toBe('DISABLED');
    const count = rx.received.length;
    await emit(a, 'flaky.three');
    await new Promise((r) => setTimeout(r, 300));
    expect(rx.received.length).toBe(count);
    // Re-enabling starts afresh.
    const on = await s.request('PATCH', `/v1/webhook-subscriptions/${sub.id}`, { auth: a, body: { status: 'ACTIVE' } });
    expect(on.json).toMatchObject({ status: 'ACTIVE', consecutive_failures: 0 });
  });

  it('holds deliveries over max_per_second in the queue without spending attempts', async () => {
    const rx = await receiver();
    const sub = await subscribe(a, rx.url, ['throttled.*'], { max_per_second: 2 });
    for (let i = 0; i < 5; i++) await enqueueEvent(a.appId, 'throttled.x');
    const got = await rx.waitFor(5, undefined, 10_000);
    // Counted per second of sending (the attempt's signed timestamp), which is what the limit is
    // about: arrival times add the trip, so one sent at x.999 can land in the next second.
    const perSecond = new Map<string, number>();
    for (const g of got)
      perSecond.set(String(g.headers['x-service-timestamp']), (perSecond.get(String(g.headers['x-service-timestamp'])) ?? 0) + 1);
    expect(Math.max(...perSecond.values())).toBeLessThanOrEqual(2);
    expect(got.every((g) => g.headers['x-service-retry-count'] === undefined)).toBe(true);
    const logs = await eventually(async () => {
      const l = await logsOf(sub.id);
      return l.length === 5 && l;
    });
    expect(logs.every((l) => l.attempt_count === 1 && l.status === 'delivered')).toBe(true);
  });
});

describe('secret rotation', () => {
  it('signs with both secrets during the overlap, so old and new verifiers accept', async () => {
    const rx = await receiver();
    const sub = await subscribe(a, rx.url, ['rotate.*']);
    const rot = await s.request('POST', `/v1/webhook-subscriptions/${sub.id}/rotate-secret`, { auth: a });
    expect(rot.status).toBe(200);
    expect(rot.json.secret).not.toBe(sub.secret);
    expect(Date.parse(rot.json.previous_secret_expires_at) - Date.now()).toBeGreaterThan(23 * 3600 * 1000);
    await emit(a, 'rotate.one');
    const [got] = await rx.waitFor(1);
    expect(String(got.headers['x-service-signature']).split(' ')).toHaveLength(2);
    expect(verifyService(rot.json.secret, got)).toBe(true);
    expect(verifyService(sub.secret!, got)).toBe(true);
    expect(new Webhook(rot.json.secret).verify(got.body, got.headers as Record<string, string>)).toBeTruthy();
    expect(new Webhook(sub.secret!).verify(got.body, got.headers as Record<string, string>)).toBeTruthy();

    // Once the window is over only the new secret signs.
    await s.deps.sql`UPDATE webhook_subscriptions SET previous_expires_at = now() - interval '1 second' WHERE id = ${sub.id}`;
    await publishSubscriptionsChanged(s.deps, a.appId);
    await eventually(async () => {
      await emit(a, 'rotate.two');
      const last = rx.received.at(-1)!;
      return last.json.event_type === 'rotate.two' && String(last.headers['x-service-signature']).split(' ').length === 1;
    });
    const last = rx.received.at(-1)!;
    expect(verifyService(rot.json.secret, last)).toBe(true);
    expect(verifyService(sub.secret!, last)).toBe(false);
  });
});

describe('tenant isolation', () => {
  it("never delivers another application's events and hides its subscriptions and logs", async () => {
    const b = await s.createApp();
    const rxA = await receiver();
    const rxB = await receiver();
    const subA = await subscribe(a, rxA.url, ['tenant.*']);
    await subscribe(b, rxB.url, ['*']);
    const evA = await emit(a, 'tenant.a');
    const evB = await emit(b, 'tenant.b');
    await rxA.waitFor(1);
    await rxB.waitFor(1);
    await new Promise((r) => setTimeout(r, 200));
    expect(rxA.received.map((r) => r.json.event_id)).toEqual([evA.id]);
    expect(rxB.received.map((r) => r.json.event_id)).toEqual([evB.id]);
    expect(rxB.received[0].json.app_id).toBe(b.appId);
    await eventually(async () => (await logsOf(subA.id)).length === 1);
    expect((await s.request('GET', `/v1/webhook-subscriptions/${subA.id}/deliveries`, { auth: b })).status).toBe(404);
    expect((await s.request('GET', `/v1/webhook-subscriptions/${subA.id}`, { auth: b })).status).toBe(404);
    expect((await s.request('PATCH', `/v1/webhook-subscriptions/${subA.id}`, { auth: b, body: { status: 'PAUSED' } })).status).toBe(404);
    expect((await s.request('POST', `/v1/webhook-subscriptions/${subA.id}/replay`, { auth: b, body: { since: evA.cursor } })).status).toBe(
      404,
    );
    const g = await s.gql(b, `query($id: ID!) { webhookDeliveryLogs(webhookSubscriptionId: $id, first: 5) { edges { node { id } } } }`, {
      id: subA.id,
    });
    expect(g.json.errors[0].extensions.code).toBe('NOT_FOUND');
    const list = await s.request('GET', '/v1/webhook-subscriptions', { auth: b });
    expect(list.json.data.map((x: { id: string }) => x.id)).not.toContain(subA.id);
  });
});

/** Puts an event straight on the ledger queue (no wait for commit), for bursts. */
async function enqueueEvent(appId: string, eventType: string) {
  const { randomUUID } = await import('node:crypto');
  await enqueue(s.deps.queues, 'ledger', {
    event: { id: randomUUID(), app_id: appId, event_type: eventType, payload: {}, edges: [], attachments: [] },
  });
}

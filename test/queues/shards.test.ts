import { randomUUID } from 'node:crypto';
import { UnrecoverableError, Worker } from 'bullmq';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { listDeadLetters, requeueDeadLetter } from '../../src/dead-letters.js';
import { closeDeps, createDeps } from '../../src/deps.js';
import { createLogger } from '../../src/logger.js';
import { createRedis } from '../../src/redis.js';
import {
  catalogQueues,
  enqueue,
  keySlot,
  queueFor,
  queueShard,
  shardOf,
  shardTags,
  SHARDED_QUEUES,
  type LedgerEvent,
} from '../../src/queues.js';
import { startWorkers } from '../../workers/index.js';
import { TelegramFake } from '../fakes/telegram.js';
import { CASES } from '../inbound/cases.js';
import { connect, eventually, postWebhook, waitForEvents } from '../inbound/helpers.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { startReceiver, type Receiver } from '../webhooks/receiver.js';

/** ioredis's own slot function: the reference the shard tags are checked against. */
const clusterKeySlot = createRequire(import.meta.url)('cluster-key-slot') as (key: string) => number;

const SLOTS = 16384;
/** The masters of an evenly split cluster of `m` masters, as `redis-cli --cluster create` splits it. */
const masterOf = (slot: number, m: number) => Math.min(m - 1, Math.floor(slot / Math.ceil(SLOTS / m)));

describe('shard choice and tags', () => {
  it('picks the same shard for an application in every process and release', () => {
    // Pinned: a changed hash would move every application's jobs to another queue.
    expect([1, 2, 4, 6, 16].map((n) => shardOf('0195f3a2-7c1e-7d4b-9a51-3c2d9e8f1a00', n))).toEqual([0, 1, 3, 5, 11]);
    expect(shardOf('00000000-0000-4000-8000-000000000000', 4)).toBe(shardOf('00000000-0000-4000-8000-000000000000', 4));
  });

  it('spreads applications evenly over the shards', () => {
    for (const n of [2, 4, 6]) {
      const counts = new Array<number>(n).fill(0);
      for (let i = 0; i < 6000; i++) counts[shardOf(randomUUID(), n)]++;
      for (const c of counts) expect(Math.abs(c - 6000 / n)).toBeLessThan((6000 / n) * 0.1);
    }
  });

  it('gives each shard a tag whose slot is nearest the middle of the i-th of N equal ranges, so N shards land on every master of an even cluster', () => {
    for (const key of ['', 'a', '123456789', 'gw:q:ledger', '1bz']) expect(keySlot(key)).toBe(clusterKeySlot(key));
    for (const n of [1, 2, 3, 4, 6, 12, 64]) {
      const tags = shardTags(n);
      expect(new Set(tags).size).toBe(n);
      expect(tags).toEqual(shardTags(n));
      const slots = tags.map((t) => clusterKeySlot(`{${t}}:anything`));
      for (const [i, slot] of slots.entries()) expect(Math.abs(slot - Math.round(((i + 0.5) * SLOTS) / n))).toBeLessThanOrEqual(2);
      for (const m of [2, 3]) {
        if (n % m) continue;
        const perMaster = new Array<number>(m).fill(0);
        for (const slot of slots) perMaster[masterOf(slot, m)]++;
        expect(perMaster).toEqual(new Array<number>(m).fill(n / m));
      }
    }
  });
});

const ledgerEvent = (appId: string, type = 'shard.test'): LedgerEvent => ({
  id: randomUUID(),
  app_id: appId,
  event_type: type,
  payload: {},
  edges: [],
  attachments: [],
});

describe('queue keys', () => {
  let s: TestStack;
  beforeAll(async () => {
    s = await startTestStack({ workers: false });
  });
  afterAll(() => s.close());

  it('keeps today’s queue names and keys with QUEUE_SHARDS=1', async () => {
    const p = s.config.REDIS_PREFIX;
    for (const q of SHARDED_QUEUES) expect(queueFor(s.deps.queues, q, randomUUID()).name).toBe(q);
    const ev = ledgerEvent(randomUUID());
    await enqueue(s.deps.queues, 'ledger', { event: ev });
    const keys = (await s.deps.redis.keys(`${p}:q:*`)).sort();
    const ledger = ['events', 'id', 'marker', 'meta', 'wait', `ev-${ev.id}`].map((k) => `${p}:q:ledger:${k}`);
    const others = ['inbound', 'maintenance', 'send', 'transcription', 'webhook'].map((q) => `${p}:q:${q}:meta`);
    expect(keys).toEqual([...ledger, ...others].sort());
  });

  it('puts each shard’s keys in one slot of its own, after REDIS_PREFIX without its tag', () => {
    const tags = shardTags(4);
    for (const prefix of ['gw', '{gw}', 'a{gw}b']) {
      const plain = prefix.replace(/[{}]/g, '');
      for (let i = 0; i < 4; i++) {
        const shard = queueShard(prefix, 'ledger', 4, i);
        expect(shard).toEqual({ queue: 'ledger', name: `ledger.${i}of4`, prefix: `${plain}:q:{${tags[i]}}` });
        for (const suffix of ['wait', 'active', 'ev-1', 'meta']) {
          expect(clusterKeySlot(`${shard.prefix}:${shard.name}:${suffix}`)).toBe(clusterKeySlot(tags[i]));
        }
      }
      // The unsharded queues keep their single queue.
      expect(queueShard(prefix, 'maintenance', 4, 0)).toEqual({ queue: 'maintenance', name: 'maintenance', prefix: `${prefix}:q` });
    }
  });
});

/** Applications whose ids fall on at least `spread` different shards of `n`. */
async function appsOnShards(s: TestStack, count: number, n: number, spread: number): Promise<AppCredentials[]> {
  const apps: AppCredentials[] = [];
  while (apps.length < count || new Set(apps.map((a) => shardOf(a.appId, n))).size < spread) apps.push(await s.createApp());
  return apps;
}

describe('QUEUE_SHARDS=4 end to end', () => {
  let s: TestStack;
  let tg: TelegramFake;
  let rx: Receiver;
  beforeAll(async () => {
    tg = await TelegramFake.start();
    rx = await startReceiver();
    // A refused delivery is retried 50 ms later (the default waits a minute).
    s = await startTestStack({ env: { QUEUE_SHARDS: '4', RATE_LIMIT_PER_MINUTE: '100000', WEBHOOK_RETRY_DELAYS_MS: '0,50,1000' } });
  });
  afterAll(async () => {
    await s.close();
    await tg.close();
    await rx.close();
  });

  it('serves an event, a webhook delivery, a send and an inbound update of applications on different shards', async () => {
    const apps = await appsOnShards(s, 3, 4, 3);
    expect(s.workers!.workers.map((w) => w.name)).toEqual(
      expect.arrayContaining(['ledger.0of4', 'ledger.3of4', 'inbound.2of4', 'maintenance']),
    );
    for (const [i, a] of apps.entries()) {
      const sub = await s.request('POST', '/v1/webhook-subscriptions', {
        auth: a,
        body: { name: 'hook', target_url: `${rx.url}/${a.appId}`, event_patterns: ['shard.*'] },
      });
      expect(sub.status, sub.text).toBe(201);
      // The first attempt (made in the worker's process, no webhook job once it is written) is
      // refused, so its retry is a job: on the application's webhook shard.
      rx.answer({ status: 500 }, { status: 200, body: 'ok' });
      const ev = await s.request('POST', '/v1/events', { auth: a, body: { event_type: 'shard.ping', payload: { i } } });
      expect(ev.status, ev.text).toBe(201);
      await rx.waitFor(2, (r) => r.path.endsWith(`/${a.appId}`) && r.json?.event_id === ev.json.id);

      const conn = await connect(s, a, 'TELEGRAM', {
        bot_token: `${700 + i}:AAE-shard`,
        secret_token: 'tg_secret-token_1',
        api_base_url: tg.url,
      });
      const sent = await s.request('POST', '/v1/messages', {
        auth: a,
        body: { platform_connection_id: conn.id, to_external_id: '42', message: 'hi' },
      });
      expect(sent.status, sent.text).toBe(201);
      expect(sent.json.status).toBe('sent');

      const d = CASES[0].text(i, `inbound ${i}`, conn.webhookUrl);
      expect((await postWebhook(s, conn.path, d.body, d.headers)).status).toBe(200);
      await waitForEvents(s, a.appId, 'message.inbound');

      // Its jobs went to its own shard (webhook: the retry; transcription has none here: only
      // voice messages make one, checked on its own below).
      for (const q of SHARDED_QUEUES.filter((q) => q !== 'transcription')) {
        const counts = await queueFor(s.deps.queues, q, a.appId).getJobCounts('completed', 'delayed', 'waiting', 'active');
        expect(
          Object.values(counts).reduce((x, y) => x + y, 0),
          `${q} of ${a.appId}`,
        ).toBeGreaterThan(0);
      }
    }
    const ran = await Promise.all(catalogQueues(s.deps.queues, 'ledger').map((q) => q.getCompletedCount()));
    expect(ran.filter((n) => n > 0).length).toBeGreaterThanOrEqual(3);
  });

  it('splits a batch of several applications into one job per shard', async () => {
    const apps = await appsOnShards(s, 2, 4, 2);
    const events = apps.map((a) => ledgerEvent(a.appId));
    await enqueue(s.deps.queues, 'ledger', { events });
    await eventually(async () => {
      const rows = await s.deps.sql`SELECT id FROM events WHERE id IN ${s.deps.sql(events.map((e) => e.id))}`;
      return rows.length === events.length || undefined;
    });
    for (const e of events) {
      const jobs = await queueFor(s.deps.queues, 'ledger', e.app_id).getCompleted(0, 1000);
      expect(
        jobs.some(
          (j) =>
            j.data.events?.some((x: LedgerEvent) => x.id === e.id) &&
            j.data.events.every((x: LedgerEvent) => shardOf(x.app_id, 4) === shardOf(e.app_id, 4)),
        ),
      ).toBe(true);
    }
  });

  it('keeps each application’s ledger order: positions follow the order of its acknowledged events, across shards', async () => {
    const apps = await appsOnShards(s, 6, 4, 4);
    // Each application posts its events one after another; the applications run at once.
    const posted = await Promise.all(
      apps.map(async (a) => {
        const ids: string[] = [];
        for (let k = 0; k < 15; k++) {
          const r = await s.request('POST', '/v1/events', { auth: a, body: { event_type: 'shard.order', payload: { k } } });
          expect(r.status, r.text).toBe(201);
          ids.push(r.json.id);
        }
        return [a.appId, ids] as const;
      }),
    );
    for (const [appId, ids] of posted) {
      const rows = await s.deps.sql<
        { id: string }[]
      >`SELECT id FROM events WHERE app_id = ${appId} AND event_type = 'shard.order' ORDER BY seq`;
      expect(rows.map((r) => r.id)).toEqual(ids);
    }
  });
});

describe('changing QUEUE_SHARDS on a running deployment', () => {
  let s: TestStack;
  beforeAll(async () => {
    s = await startTestStack({ workers: false, env: { EVENT_WAIT_MS: '50', RATE_LIMIT_PER_MINUTE: '100000' } });
  });
  afterAll(() => s.close());

  it('processes jobs left in the QUEUE_SHARDS=1 queues once workers serve both sets, and orders one application across both', async () => {
    const apps = await appsOnShards(s, 4, 4, 3);
    // Before: QUEUE_SHARDS=1, no worker running. Events are acknowledged as queued (202).
    const before: string[] = [];
    for (const a of apps) {
      const r = await s.request('POST', '/v1/events', { auth: a, body: { event_type: 'move.before', payload: {} } });
      expect(r.status, r.text).toBe(202);
      before.push(r.json.id);
    }
    // One application's jobs wait in the old queue while more of its events arrive on its new shard.
    const one = apps[0].appId;
    const old = Array.from({ length: 40 }, () => ledgerEvent(one, 'move.same'));
    for (const e of old.slice(0, 20)) await enqueue(s.deps.queues, 'ledger', { event: e });
    expect(await queueFor(s.deps.queues, 'ledger').getWaitingCount()).toBe(apps.length + 20);

    // Step 1 of the move: producers on QUEUE_SHARDS=4, workers serving both sets.
    const moved = createDeps(parseConfig({ ...s.env, QUEUE_SHARDS: '4', QUEUE_SHARDS_PREVIOUS: '1' }), { logger: createLogger('silent') });
    for (const e of old.slice(20)) await enqueue(moved.queues, 'ledger', { event: e });
    expect(await queueFor(moved.queues, 'ledger', one).getWaitingCount()).toBe(20);
    const host = startWorkers(moved);
    try {
      expect(
        host.workers
          .filter((w) => w.name.startsWith('ledger'))
          .map((w) => w.name)
          .sort(),
      ).toEqual(['ledger', 'ledger.0of4', 'ledger.1of4', 'ledger.2of4', 'ledger.3of4']);
      // A web process not yet switched keeps adding to the old queue, which is still served.
      const late = await s.request('POST', '/v1/events', { auth: apps[1], body: { event_type: 'move.late', payload: {} } });
      expect([201, 202]).toContain(late.status);
      await eventually(
        async () => {
          const [{ n }] = await s.deps.sql<
            { n: number }[]
          >`SELECT count(*)::int AS n FROM events WHERE id IN ${s.deps.sql([...before, ...old.map((e) => e.id)])}`;
          return n === before.length + old.length || undefined;
        },
        20_000,
        'the old and new queues to be processed',
      );
      // Both sets drained; positions of the one application are dense and unique whichever queue its events came through.
      expect(await queueFor(s.deps.queues, 'ledger').getWaitingCount()).toBe(0);
      const seqs = await s.deps.sql<{ seq: string }[]>`SELECT seq FROM events WHERE app_id = ${one} ORDER BY seq`;
      expect(seqs).toHaveLength(1 + old.length);
      expect(seqs.map((r) => Number(r.seq))).toEqual(seqs.map((_, i) => Number(seqs[0].seq) + i));
    } finally {
      await host.close();
      await closeDeps(moved);
    }
  });
});

describe('operators with QUEUE_SHARDS=4', () => {
  let s: TestStack;
  beforeAll(async () => {
    s = await startTestStack({ workers: false, env: { QUEUE_SHARDS: '4' } });
  });
  afterAll(() => s.close());

  it('Bull Board lists every shard, grouped under its queue by the `.` delimiter', async () => {
    const r = await fetch(`${s.base}/admin/queues/api/queues`, { headers: { Authorization: `Bearer ${s.config.ADMIN_TOKEN}` } });
    expect(r.status).toBe(200);
    const queues = (await r.json()).queues as { name: string; delimiter: string }[];
    const sharded = SHARDED_QUEUES.flatMap((q) => [0, 1, 2, 3].map((i) => `${q}.${i}of4`));
    expect(queues.map((q) => q.name).sort()).toEqual([...sharded, 'maintenance'].sort());
    expect(new Set(queues.map((q) => q.delimiter))).toEqual(new Set(['.']));
  });

  it("puts a voice message's transcription job on its application's shard, in the slot of its inbound job", async () => {
    const appId = randomUUID();
    const event = ledgerEvent(appId);
    await enqueue(s.deps.queues, 'transcription', { app_id: appId, event, file_id: randomUUID() });
    const shard = queueFor(s.deps.queues, 'transcription', appId);
    expect((await shard.getJob(`tr-${event.id}`))?.data.file_id).toBeDefined();
    expect(shard.name).toBe(`transcription.${shardOf(appId, 4)}of4`);
    // One hash tag: the inbound job that adds it and the job itself are on one master.
    expect(shard.opts.prefix).toBe(queueFor(s.deps.queues, 'inbound', appId).opts.prefix);
  });

  it('lists and requeues dead letters of every shard of a queue', async () => {
    const a = randomUUID();
    let b = randomUUID();
    while (shardOf(b, 4) === shardOf(a, 4)) b = randomUUID();
    const events = [ledgerEvent(a), ledgerEvent(b)];
    for (const e of events) await enqueue(s.deps.queues, 'ledger', { event: e });
    // A real worker per shard that refuses its job for good, as the ledger does with data the database refuses.
    const connection = createRedis(s.config.REDIS_URL, 'blocking');
    const shards = [a, b].map((app) => queueShard(s.config.REDIS_PREFIX, 'ledger', 4, shardOf(app, 4)));
    let failed = 0;
    let allFailed!: () => void;
    const done = new Promise<void>((r) => (allFailed = r));
    const workers = shards.map((shard) => {
      const w = new Worker(
        shard.name,
        async () => {
          throw new UnrecoverableError('refused');
        },
        { connection, prefix: shard.prefix },
      );
      w.on('failed', () => ++failed === 2 && allFailed());
      return w;
    });
    await done;
    await Promise.all(workers.map((w) => w.close()));
    await connection.quit();

    const dead = await listDeadLetters(s.deps.queues, 'ledger');
    expect(dead.map((d) => [d.queue, d.id]).sort()).toEqual(events.map((e) => ['ledger', `ev-${e.id}`]).sort());
    for (const e of events) expect(await requeueDeadLetter(s.deps.queues, 'ledger', `ev-${e.id}`)).toBe('requeued');
    for (const e of events) expect(await queueFor(s.deps.queues, 'ledger', e.app_id).getJobState(`ev-${e.id}`)).toBe('waiting');
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { mergedEvent, mergeUsers } from '../../src/identity/merge.js';
import { createWakeHub, type WakeHub } from '../../src/ledger/wake-hub.js';
import { wakeChannels } from '../../src/ledger/wake.js';
import { startReader } from '../../src/stream/reader.js';
import { createTailRegistry, type TailEvent, type TailRegistry } from '../../src/stream/tail.js';
import { createTestEnv, type TestEnv } from '../helpers/stack.js';
import { commit, until } from './helpers.js';

let t: TestEnv;
let deps: Deps;
let wakes: WakeHub;
let tails: TailRegistry;

beforeAll(async () => {
  t = await createTestEnv();
  deps = createDeps(t.config);
  wakes = createWakeHub(t.config.redis, wakeChannels(t.config), deps);
  await wakes.ready;
  // No periodic re-check in this file: every query below is caused by a wake.
  tails = createTailRegistry(deps, wakes, deps.logger, { recheckMs: 3_600_000 });
});
afterAll(async () => {
  tails.close();
  await wakes.close();
  await closeDeps(deps);
  await t.dropDatabase();
});

/** A sink that records what it is given. */
const recorder = () => {
  const got: TailEvent[] = [];
  const sink = { closed: false, send: async (e: TailEvent) => void got.push(e), push: (e: TailEvent) => void got.push(e) };
  return { got, sink };
};

describe('the per-application tail', () => {
  it("reads once per wake for all of an application's streams and hands every stream the same serialised event", async () => {
    const app = await createApplication(deps.sql, 'fanout', ['events:read']);
    const streams = Array.from({ length: 50 }, recorder);
    const readers = await Promise.all(
      streams.map((r, i) => startReader(deps.sql, tails, app.appId, i % 2 ? { eventTypes: ['odd.*'] } : {}, { live: true }, r.sink)),
    );
    expect(tails.size()).toBe(1);

    const before = { ...tails.stats };
    const ids: string[] = [];
    for (let k = 0; k < 10; k++) {
      ids.push(...(await commit(deps, app.appId, [{ event_type: 'odd.x', payload: { k } }])));
      await until(() => streams.every((r) => r.got.length === k + 1), 5000, `event ${k} at every stream`);
    }
    expect(tails.stats.queries - before.queries).toBe(10);
    for (const r of streams) expect(r.got.map((e) => e.record.id)).toEqual(ids);
    for (let k = 0; k < 10; k++) {
      const first = streams[0].got[k];
      for (const r of streams) expect(r.got[k]).toBe(first);
    }

    for (const r of readers) r.close();
    expect(tails.size()).toBe(0);
  });

  it('coalesces a burst of wakes into at most two queries and skips wakes for positions already read', async () => {
    const app = await createApplication(deps.sql, 'coalesce', ['events:read']);
    const r = recorder();
    const reader = await startReader(deps.sql, tails, app.appId, {}, { live: true }, r.sink);
    // Commit 20 events without waking, then deliver 20 wakes at once.
    const ids = await commit(
      deps,
      app.appId,
      Array.from({ length: 20 }, (_, i) => ({ payload: { i } })),
      { wake: false },
    );
    const before = { ...tails.stats };
    const channel = `${t.config.REDIS_PREFIX}:wake:${app.appId}`;
    await Promise.all(Array.from({ length: 20 }, (_, i) => deps.redis.publish(channel, String(i + 1))));
    await until(() => r.got.length === 20, 5000, 'all events');
    expect(r.got.map((e) => e.record.id)).toEqual(ids);
    await until(() => tails.stats.wakes - before.wakes === 20, 5000, 'all wakes');
    expect(tails.stats.queries - before.queries).toBeLessThanOrEqual(2);

    const stale = { ...tails.stats };
    for (let i = 0; i < 5; i++) await deps.redis.publish(channel, '20');
    await until(() => tails.stats.wakes - stale.wakes === 5, 5000, 'stale wakes');
    expect(tails.stats.queries).toBe(stale.queries);
    expect(tails.stats.skippedWakes - stale.skippedWakes).toBe(5);
    reader.close();
  });

  it('a user filter learns of a merge during catch-up even when a type filter excludes the user.merged event', async () => {
    const app = await createApplication(deps.sql, 'merge-in-catch-up', ['events:read']);
    const [ua, ub] = await deps.sql<
      { id: string }[]
    >`INSERT INTO users (app_id, name) VALUES (${app.appId}, 'A'), (${app.appId}, 'B') RETURNING id`;
    const [a1] = await deps.sql<
      { id: string }[]
    >`INSERT INTO platform_users (app_id, user_id, platform, external_id) VALUES (${app.appId}, ${ua.id}, 'TELEGRAM', 'a1') RETURNING id`;
    const [b1] = await deps.sql<
      { id: string }[]
    >`INSERT INTO platform_users (app_id, user_id, platform, external_id) VALUES (${app.appId}, ${ub.id}, 'TELEGRAM', 'b1') RETURNING id`;
    const edge = (id: string) => [{ edge_type: 'sent_by', target_node_type: 'platform_user' as const, target_node_id: id }];
    const [marker] = await commit(deps, app.appId, [{ event_type: 'marker' }]);
    const [{ seq }] = await deps.sql<{ seq: number }[]>`SELECT seq FROM events WHERE id = ${marker}`;
    const [e1, e2] = await commit(deps, app.appId, [
      { event_type: 'order.a', edges: edge(a1.id) },
      { event_type: 'order.a', edges: edge(a1.id) },
    ]);

    // Catch-up is held at its first event while A is merged into B.
    const got: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let held!: () => void;
    const holding = new Promise<void>((r) => (held = r));
    const sink = {
      closed: false,
      async send(e: TailEvent) {
        got.push(e.record.id);
        if (got.length === 1) {
          held();
          await gate;
        }
      },
      push: (e: TailEvent) => void got.push(e.record.id),
    };
    const reading = startReader(deps.sql, tails, app.appId, { userId: ua.id, eventTypes: ['order.*'] }, { afterSeq: seq }, sink);
    await holding;
    const merged = await mergeUsers(deps, app.appId, { targetUserId: ub.id, sourceUserId: ua.id });
    if (!merged.ok) throw new Error(merged.error.message);
    await commit(deps, app.appId, [mergedEvent(merged.value)]);
    const [e3] = await commit(deps, app.appId, [{ event_type: 'order.b', edges: edge(b1.id) }]);
    release();
    const reader = await reading;
    await until(() => got.length === 3, 5000, "B's event after the merge");
    expect(got).toEqual([e1, e2, e3]);
    reader.close();
  });
});

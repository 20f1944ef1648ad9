import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { announceChange, watchChanges } from '../../src/change-feed.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { createLogger } from '../../src/logger.js';
import { createTestEnv, type TestEnv } from '../helpers/stack.js';

/**
 * Per-process caches of connections and webhook subscriptions drop what a change touched when
 * it is announced. The process that made the change must not depend on Redis pub/sub's round
 * trip to see it: its client may use the changed thing in its very next request.
 */
let t: TestEnv;
let here: Deps;
let there: Deps;
beforeAll(async () => {
  t = await createTestEnv();
  here = createDeps(t.config, { logger: createLogger('silent') });
  there = createDeps(t.config, { logger: createLogger('silent') });
});
afterAll(async () => {
  await closeDeps(here);
  await closeDeps(there);
  await t.dropDatabase();
});

async function until(check: () => boolean, what: string, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the change feed', () => {
  it("tells this process's own watchers before the announcement has gone through Redis", async () => {
    const seen: (string | undefined)[] = [];
    const watch = watchChanges(here, 'connections', (id) => seen.push(id));
    await watch.ready;
    seen.length = 0;
    const announced = announceChange(here, 'connections', 'conn-1');
    // No I/O has run since the call: only a direct call can have told the watcher.
    expect(seen).toEqual(['conn-1']);
    await announced;
    await watch.close();
  });

  it('tells watchers in other processes through Redis, and a closed watcher no more', async () => {
    const seen: (string | undefined)[] = [];
    const watch = watchChanges(there, 'webhook-subscriptions', (id) => seen.push(id));
    await watch.ready;
    await announceChange(here, 'webhook-subscriptions', 'app-1');
    await until(() => seen.includes('app-1'), 'the announcement in the other process');
    await watch.close();
    seen.length = 0;
    await announceChange(there, 'webhook-subscriptions', 'app-2');
    expect(seen).toEqual([]);
  });

  it('shares one Redis connection between every watcher of a process, whatever their topics', async () => {
    const feeds = async () =>
      ((await here.redis.client('LIST')) as string).split('\n').filter((l) => l.includes(` name=${t.config.REDIS_PREFIX}:changes `)).length;
    const before = await feeds();
    const own = createDeps(t.config, { logger: createLogger('silent') });
    const seen: string[] = [];
    try {
      const watches = [
        watchChanges(own, 'connections', (id) => id && seen.push(`a:${id}`)),
        watchChanges(own, 'connections', (id) => id && seen.push(`b:${id}`)),
        watchChanges(own, 'webhook-subscriptions', (id) => id && seen.push(`c:${id}`)),
      ];
      await Promise.all(watches.map((w) => w.ready));
      expect(await feeds()).toBe(before + 1);
      await announceChange(there, 'connections', 'conn-9');
      await announceChange(there, 'webhook-subscriptions', 'app-9');
      await until(() => seen.includes('a:conn-9') && seen.includes('b:conn-9') && seen.includes('c:app-9'), 'each watcher told');
      expect(seen.filter((x) => x.endsWith('conn-9')).sort()).toEqual(['a:conn-9', 'b:conn-9']);
      expect(seen.filter((x) => x.endsWith('app-9'))).toEqual(['c:app-9']);
    } finally {
      await closeDeps(own);
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../../src/auth/api-keys.js';
import { createRevokedKeyWatch, type StreamEndReason } from '../../src/stream/revoked-keys.js';
import { startTestStack, type TestStack } from '../helpers/stack.js';

let s: TestStack;
beforeAll(async () => {
  s = await startTestStack({ workers: false });
});
afterAll(() => s?.close());

describe('the revoked-key watch of a web process', () => {
  it('costs one key lookup per revocation or new key, not one per stream per tick', async () => {
    const app = await s.createApp();
    const keys = await Promise.all([1, 2, 3].map(() => s.createKey(app.appId, ['events:read'])));
    // An hour between timer ticks: the test drives the checks itself.
    const watch = createRevokedKeyWatch(s.deps.sql, s.web.services.stamps, s.deps.logger, { intervalMs: 3_600_000 });
    const ended: { key: string; reason: StreamEndReason }[] = [];
    const untrack: (() => void)[] = [];
    for (let i = 0; i < 60; i++) {
      const key = keys[i % 3].keyId;
      untrack.push(watch.add(key, (reason) => ended.push({ key, reason })));
    }
    await watch.check();
    expect(watch.stats.lookups).toBe(1);
    for (let i = 0; i < 10; i++) await watch.check();
    // Nothing changed: ten more ticks over 60 streams ran no lookup at all.
    expect(watch.stats).toEqual({ checks: 11, lookups: 1 });
    expect(ended).toEqual([]);

    expect(await revokeApiKey(s.deps.sql, keys[1].keyId)).toBe(true);
    await watch.check();
    expect(watch.stats.lookups).toBe(2);
    expect(ended).toHaveLength(20);
    expect(new Set(ended.map((e) => `${e.key}/${e.reason}`))).toEqual(new Set([`${keys[1].keyId}/revoked`]));
    for (const u of untrack) u();
    watch.close();
  });
});

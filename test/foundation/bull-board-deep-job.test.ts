import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queuePrefix, queueFor } from '../../src/queues.js';
import { startTestStack, type TestStack } from '../helpers/stack.js';

let s: TestStack;
beforeAll(async () => {
  s = await startTestStack({ workers: false });
});
afterAll(() => s.close());

const DEPTH = 5_000;

describe("Bull Board's job list", () => {
  it('renders a job whose data is nested 5,000 levels deep (it answered 500 "Maximum call stack size exceeded")', async () => {
    const job = await queueFor(s.deps.queues, 'ledger').add('ledger', { placeholder: true }, { jobId: `deep-${randomUUID()}` });
    // As a producer that got it stored would leave it: too deep for JSON.stringify, fine for JSON.parse.
    const deep = `${'{"a":'.repeat(DEPTH)}1${'}'.repeat(DEPTH)}`;
    await s.deps.redis.hset(`${queuePrefix(s.config.REDIS_PREFIX)}:ledger:${job.id}`, 'data', deep);
    const r = await fetch(`${s.base}/admin/queues/api/queues?activeQueue=ledger&status=waiting&page=1`, {
      headers: { Authorization: `Bearer ${s.config.ADMIN_TOKEN}` },
    });
    expect(r.status).toBe(200);
    const ledger = ((await r.json()).queues as { name: string; jobs: { id: string; data: unknown }[] }[]).find((q) => q.name === 'ledger')!;
    const shown = ledger.jobs.find((j) => j.id === job.id)!;
    // The top of the data is shown as it is; below a bound, a marker says what was cut.
    let node = shown.data as Record<string, unknown>;
    let levels = 0;
    while (typeof node === 'object' && node !== null && 'a' in node && levels < DEPTH) {
      node = node.a as Record<string, unknown>;
      levels++;
    }
    expect(levels).toBeGreaterThanOrEqual(10);
    expect(levels).toBeLessThan(DEPTH);
    expect(node).toMatch(/nested deeper/);
  });
});

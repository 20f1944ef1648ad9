import { queueFor } from '../../src/queues.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileMatcher, matchesPattern, patternProblem } from '../../src/ledger/patterns.js';
import { openSse } from '../helpers/sse.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { commit } from '../stream/helpers.js';
import { eventually, startReceiver, type Receiver } from '../webhooks/receiver.js';

/**
 * Event-type patterns are tenant input matched on shared processes (the ledger worker's
 * fan-out, every open stream): matching must take bounded time whatever the pattern, and a
 * malformed pattern must be refused when written, not fail every ledger batch that meets it.
 */

/** Milliseconds of the median of `runs` calls: one slow run on a loaded machine is not the matcher. */
function medianMs(f: () => void, runs = 5): number {
  const times = Array.from({ length: runs }, () => {
    const t = performance.now();
    f();
    return performance.now() - t;
  });
  return times.sort((a, b) => a - b)[Math.floor(runs / 2)];
}

describe('matching time', () => {
  it('matches catastrophic patterns against long types in well under 100 ms', () => {
    const type = 'a'.repeat(60);
    for (const pattern of ['*a*a*a*a*a*a*b', `${'*a'.repeat(40)}*b`, `${'*?'.repeat(60)}b`, `${'*[a-z]'.repeat(50)}*.`]) {
      expect(
        medianMs(() => matchesPattern(pattern, type)),
        pattern,
      ).toBeLessThan(20);
      expect(matchesPattern(pattern, type)).toBe(false);
    }
    const long = `${'a.'.repeat(99)}b`;
    expect(medianMs(() => matchesPattern(`${'*a'.repeat(66)}*c`, long))).toBeLessThan(20);
  });
});

/** The fnmatch semantics as a RegExp, for short inputs only (it backtracks). */
function reference(pattern: string): RegExp {
  let src = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*') src += '.*';
    else if (c === '?') src += '.';
    else if (c === '[') {
      const close = pattern.indexOf(']', i + 2);
      let body = pattern.slice(i + 1, close);
      const negate = body.startsWith('!');
      if (negate) body = body.slice(1);
      src += `[${negate ? '^' : ''}${body.replace(/[\\\]^]/g, '\\$&')}]`;
      i = close;
    } else src += c.replace(/[.+^${}()|\\]/g, '\\$&');
  }
  return new RegExp(`^${src}$`);
}

describe('matching semantics', () => {
  it('keeps the documented patterns: exact, prefix.*, *, ?, classes', () => {
    expect(matchesPattern('message.*', 'message.inbound')).toBe(true);
    expect(matchesPattern('message.*', 'messages.x')).toBe(false);
    expect(matchesPattern('*', 'anything.at.all')).toBe(true);
    expect(matchesPattern('order.?', 'order.1')).toBe(true);
    expect(matchesPattern('order.[0-9]', 'order.7')).toBe(true);
    expect(matchesPattern('order.[!0-9]', 'order.7')).toBe(false);
    expect(matchesPattern('a[]]b', 'a]b')).toBe(true);
    expect(compileMatcher([])('x')).toBe(false);
  });

  it('agrees with the fnmatch RegExp on generated patterns and types', () => {
    const alphabet = fc.constantFrom('a', 'b', '.', '*', '?', '[ab]', '[!a]', '[a-b]');
    fc.assert(
      fc.property(
        fc.array(alphabet, { maxLength: 8 }).map((p) => p.join('')),
        fc.stringMatching(/^[ab.]{0,10}$/),
        (pattern, type) => {
          fc.pre(pattern.length > 0);
          expect(matchesPattern(pattern, type)).toBe(reference(pattern).test(type));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('finishes in bounded time for generated patterns of growing size', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom('a', '*', '?', '[a-z]', '.'), { minLength: 1, maxLength: 150 }),
        fc.stringMatching(/^[a.]{0,200}$/),
        (parts, type) => {
          const pattern = parts.join('').slice(0, 200);
          expect(medianMs(() => matchesPattern(pattern, type), 3)).toBeLessThan(50);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('malformed patterns', () => {
  it('names what is wrong, and well-formed ones pass', () => {
    expect(patternProblem('[z-a]')).toMatch(/reversed/);
    expect(patternProblem('order.[abc')).toMatch(/never closed/);
    expect(patternProblem('a]b')).toMatch(/closes no/);
    for (const ok of ['*', 'message.*', 'a.[a-z]?', 'a[]]b', 'x.[!0-9]*']) expect(patternProblem(ok), ok).toBeUndefined();
  });
});

describe('patterns at every face', () => {
  let s: TestStack;
  let a: AppCredentials;
  let b: AppCredentials;
  let rx: Receiver;
  beforeAll(async () => {
    rx = await startReceiver();
    s = await startTestStack({ workers: ['ledger', 'webhook'] });
    [a, b] = await Promise.all([s.createApp(), s.createApp()]);
  });
  afterAll(async () => {
    await s?.close();
    await rx?.close();
  });

  it('refuses a malformed pattern with 400 VALIDATION_ERROR on REST create and update', async () => {
    const bad = await s.request('POST', '/v1/webhook-subscriptions', {
      auth: a,
      body: { name: 'bad', target_url: rx.url, event_patterns: ['ok.*', '[z-a]'] },
    });
    expect(bad.status, bad.text).toBe(400);
    expect(bad.json.error.code).toBe('VALIDATION_ERROR');
    const good = await s.request('POST', '/v1/webhook-subscriptions', {
      auth: a,
      body: { name: 'good', target_url: rx.url, event_patterns: ['ok.*'] },
    });
    expect(good.status, good.text).toBe(201);
    const patch = await s.request('PATCH', `/v1/webhook-subscriptions/${good.json.id}`, {
      auth: a,
      body: { event_patterns: ['order.[abc'] },
    });
    expect(patch.status, patch.text).toBe(400);
    expect(patch.json.error.code).toBe('VALIDATION_ERROR');
    await s.request('DELETE', `/v1/webhook-subscriptions/${good.json.id}`, { auth: a });
  });

  it('refuses it on GraphQL createWebhookSubscription', async () => {
    const r = await s.gql(
      a,
      `mutation { createWebhookSubscription(name: "bad", targetUrl: "${rx.url}", eventPatterns: ["[z-a]"]) { id } }`,
    );
    expect(r.json.errors?.[0]?.extensions?.code).toBe('VALIDATION_ERROR');
  });

  it('refuses it as an SSE stream filter and a GraphQL eventStream argument', async () => {
    const sse = await s.request('GET', `/events/stream?eventTypes=${encodeURIComponent('ok.*,[z-a]')}`, { auth: a });
    expect(sse.status, sse.text).toBe(400);
    expect(sse.json.error.code).toBe('VALIDATION_ERROR');
    const c = await openSse(`${s.base}/`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...a.headers },
      body: JSON.stringify({ query: 'subscription { eventStream(eventTypes: ["[z-a]"]) { id } }' }),
    });
    const frame = await c.next(5_000);
    c.close();
    expect(JSON.stringify(frame)).toContain('VALIDATION_ERROR');
  });

  it('a malformed pattern stored before the check matches nothing and fails no ledger batch', async () => {
    // As a row written by an older version would be: straight into the table.
    const legacy = await s.request('POST', '/v1/webhook-subscriptions', {
      auth: a,
      body: { name: 'legacy', target_url: rx.url, event_patterns: ['legacy.x'] },
    });
    await s.deps.sql`UPDATE webhook_subscriptions SET event_patterns = ${['[z-a]', 'legacy.[abc']} WHERE id = ${legacy.json.id}`;
    const other = await s.request('POST', '/v1/webhook-subscriptions', {
      auth: b,
      body: { name: 'neighbour', target_url: rx.url, event_patterns: ['*'] },
    });
    expect(other.status).toBe(201);
    // Both applications' events, through the ledger worker's fan-out.
    const [mine, theirs] = await Promise.all([
      s.request('POST', '/v1/events', { auth: a, body: { event_type: 'legacy.a', payload: {} } }),
      s.request('POST', '/v1/events', { auth: b, body: { event_type: 'neighbour.a', payload: {} } }),
    ]);
    expect(mine.status, mine.text).toBe(201);
    expect(theirs.status, theirs.text).toBe(201);
    await eventually(async () => rx.received.find((d) => d.body.includes(theirs.json.id)));
    expect(rx.received.some((d) => d.body.includes(mine.json.id))).toBe(false);
    // No ledger job failed or went back for a retry because of the stored pattern.
    const ledger = queueFor(s.deps.queues, 'ledger');
    expect(await ledger.getFailedCount()).toBe(0);
    expect(await ledger.getDelayedCount()).toBe(0);
  });

  it("a catastrophic pattern does not hold up another application's event", async () => {
    const cat = await s.request('POST', '/v1/webhook-subscriptions', {
      auth: a,
      body: { name: 'cat', target_url: rx.url, event_patterns: [`${'*a'.repeat(60)}*b`] },
    });
    expect(cat.status, cat.text).toBe(201);
    const type = 'a'.repeat(120);
    await commit(
      s.deps,
      a.appId,
      Array.from({ length: 20 }, () => ({ event_type: type })),
    );
    const t = Date.now();
    const r = await s.request('POST', '/v1/events', { auth: b, body: { event_type: 'neighbour.b', payload: {} } });
    expect(r.status, r.text).toBe(201);
    expect(Date.now() - t).toBeLessThan(5_000);
  });
});

import { describe, expect, it } from 'vitest';
import { parseRetryAfter, retryDelay } from '../../src/webhooks/retry-policy.js';
import { retryHeaders } from '../../src/webhooks/deliver.js';

const SCHEDULE = [0, 60_000, 300_000, 1_800_000, 7_200_000];

describe('retry policy', () => {
  it('follows the documented schedule within ±10% jitter', () => {
    for (let made = 1; made < SCHEDULE.length; made++) {
      expect(retryDelay(SCHEDULE, made, undefined, () => 0)).toBe(Math.round(SCHEDULE[made] * 0.9));
      expect(retryDelay(SCHEDULE, made, undefined, () => 0.5)).toBe(SCHEDULE[made]);
      expect(retryDelay(SCHEDULE, made, undefined, () => 1)).toBe(Math.round(SCHEDULE[made] * 1.1));
    }
  });

  it('takes a longer Retry-After, but never more than twice the scheduled delay, and ignores a shorter one', () => {
    expect(retryDelay(SCHEDULE, 1, 90_000, () => 0.5)).toBe(90_000);
    expect(retryDelay(SCHEDULE, 1, 600_000, () => 0.5)).toBe(120_000);
    expect(retryDelay(SCHEDULE, 1, 5_000, () => 0.5)).toBe(60_000);
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    expect(parseRetryAfter('120')).toBe(120_000);
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:01:00 GMT', now)).toBe(60_000);
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(parseRetryAfter(undefined)).toBeUndefined();
  });

  it('adds retry headers from the second attempt', () => {
    expect(retryHeaders(1, 100)).toEqual({});
    expect(retryHeaders(3, 100)).toEqual({ 'x-service-retry-count': '2', 'x-service-original-timestamp': '100' });
  });
});

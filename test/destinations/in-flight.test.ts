import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createInFlightBound, type InFlightSlot } from '../../src/destinations/in-flight.js';

const DEADLINE_MS = 5_000;
/** DESTINATION_STUCK_MS's default. */
const STUCK_AFTER_MS = 1_000;

/** The slot a take was given, or a failure naming what it got instead. */
const taken = (s: InFlightSlot) => {
  if (!s.taken) throw new Error(`expected a slot, was told to wait ${s.waitMs} ms`);
  return s;
};

/** Whether a promise has settled, without waiting for it. */
async function settled<T>(p: Promise<T>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  await vi.advanceTimersByTimeAsync(0);
  return done;
}

describe('the in-flight bound of a broker destination', () => {
  // Time is what the bound judges a destination by: the tests move it themselves.
  beforeEach(() => vi.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => vi.useRealTimers());

  it('hands a released slot to the delivery waiting longest, and holds no one up below the bound', async () => {
    const bound = createInFlightBound(2, DEADLINE_MS, STUCK_AFTER_MS);
    const first = taken(await bound.take('d'));
    taken(await bound.take('d'));
    // Another destination's sends are counted apart.
    taken(await bound.take('other'));

    const waiting = [bound.take('d'), bound.take('d')];
    expect(await settled(waiting[0])).toBe(false);
    vi.advanceTimersByTime(50);
    first.release();
    const next = taken(await waiting[0]);
    expect(await settled(waiting[1])).toBe(false);
    next.release();
    taken(await waiting[1]);
  });

  it('sends the waiting deliveries back once the destination answers nothing for STUCK_AFTER_MS, and new ones at once', async () => {
    const bound = createInFlightBound(2, DEADLINE_MS, STUCK_AFTER_MS);
    const hung = [taken(await bound.take('d')), taken(await bound.take('d'))];
    const waiting = bound.take('d');
    await vi.advanceTimersByTimeAsync(STUCK_AFTER_MS - 1);
    expect(await settled(waiting)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const back = await waiting;
    expect(back.taken).toBe(false);
    // The wait grows with the age of the oldest send in flight (with up to 50 % jitter).
    expect(back.taken ? 0 : back.waitMs).toBeGreaterThanOrEqual(STUCK_AFTER_MS);
    expect(back.taken ? 0 : back.waitMs).toBeLessThanOrEqual(STUCK_AFTER_MS * 1.5);
    expect((await bound.take('d')).taken).toBe(false);

    // A send that ran into its deadline frees its slot but is no answer: still stuck, no one waits.
    await vi.advanceTimersByTimeAsync(DEADLINE_MS);
    hung[0].release();
    const retry = taken(await bound.take('d'));
    expect((await bound.take('d')).taken).toBe(false);
    hung[1].release();
    retry.release();
  });

  it('keeps deliveries waiting behind a slow destination that still answers', async () => {
    const bound = createInFlightBound(2, DEADLINE_MS, STUCK_AFTER_MS);
    const a = taken(await bound.take('d'));
    const b = taken(await bound.take('d'));
    const waiting = [bound.take('d'), bound.take('d')];
    // Each confirm takes longer than STUCK_AFTER_MS, but one arrives before the other's age counts.
    await vi.advanceTimersByTimeAsync(STUCK_AFTER_MS * 0.9);
    a.release();
    const c = taken(await waiting[0]);
    await vi.advanceTimersByTimeAsync(STUCK_AFTER_MS * 0.9);
    b.release();
    taken(await waiting[1]);
    c.release();
  });
});

/** The shortest and longest wait a delivery is told to take when its destination is stuck. */
const MIN_WAIT_MS = 100;
const MAX_WAIT_MS = 5_000;
export type InFlightSlot = { taken: true; release: () => void } | { taken: false; waitMs: number };

export interface InFlightBound {
  /**
   * A slot for one send to `key`. At the bound, the caller waits in line for a slot while the
   * destination keeps answering; once it has answered nothing for `stuckAfterMs` (a hung
   * broker), it is told how long to stay away instead.
   */
  take(key: string): Promise<InFlightSlot>;
}

interface Waiter {
  resolve: (slot: InFlightSlot) => void;
}

interface Destination {
  /** Start times of the sends in flight, oldest first. */
  starts: number[];
  waiters: Waiter[];
  /** When a send last ended before its deadline: the broker answered (or refused at once). */
  lastAnswer: number;
  watchdog?: NodeJS.Timeout;
}

/**
 * At most `max` sends in flight per destination in this process, so a broker that accepts and
 * never confirms holds `max` of the worker's slots, not all of them. A delivery over the bound
 * of a destination that answers waits in this process for the next slot (first come, first
 * served): handing it over costs nothing, where putting it back costs a queued job and two
 * writes. A destination that stops answering — no send ended within `deadlineMs` of its start
 * for `stuckAfterMs` (DESTINATION_STUCK_MS), and its oldest in flight older than that — sends
 * its waiting deliveries back for a time that grows with the age of its oldest send: a hung
 * broker holds its `max` slots, and other deliveries wait for it at most `stuckAfterMs`.
 */
export function createInFlightBound(max: number, deadlineMs: number, stuckAfterMs: number): InFlightBound {
  const destinations = new Map<string, Destination>();

  const stuck = (d: Destination, now: number) =>
    now - d.lastAnswer >= stuckAfterMs && d.starts.length > 0 && now - d.starts[0] >= stuckAfterMs;

  const backOff = (d: Destination, now: number): InFlightSlot => {
    const oldestAge = d.starts.length ? now - d.starts[0] : 0;
    const wait = Math.min(MAX_WAIT_MS, Math.max(MIN_WAIT_MS, oldestAge));
    // Jittered, so the deliveries put back together do not come back together.
    return { taken: false, waitMs: Math.round(wait * (1 + Math.random() / 2)) };
  };

  const forget = (key: string, d: Destination) => {
    if (d.starts.length === 0 && d.waiters.length === 0 && destinations.get(key) === d) destinations.delete(key);
  };

  const slot = (key: string, d: Destination, start: number): InFlightSlot => {
    d.starts.push(start);
    let released = false;
    return {
      taken: true,
      release() {
        if (released) return;
        released = true;
        const now = Date.now();
        d.starts.splice(d.starts.indexOf(start), 1);
        if (now - start < deadlineMs) d.lastAnswer = now;
        const next = d.waiters.shift();
        if (next) next.resolve(slot(key, d, now));
        else forget(key, d);
      },
    };
  };

  /** While deliveries wait: checks when the destination could next count as stuck, and sends them back if it is. */
  const watch = (key: string, d: Destination) => {
    if (d.watchdog || d.waiters.length === 0) return;
    const now = Date.now();
    const due = Math.max(d.lastAnswer, d.starts[0] ?? now) + stuckAfterMs;
    d.watchdog = setTimeout(
      () => {
        d.watchdog = undefined;
        const at = Date.now();
        if (stuck(d, at)) {
          for (const w of d.waiters.splice(0)) w.resolve(backOff(d, at));
          forget(key, d);
        } else watch(key, d);
      },
      Math.max(10, due - now),
    );
    // A waiting delivery keeps the process busy anyway; the timer alone must not.
    d.watchdog.unref();
  };

  return {
    async take(key) {
      const now = Date.now();
      let d = destinations.get(key);
      if (!d) destinations.set(key, (d = { starts: [], waiters: [], lastAnswer: now }));
      if (d.starts.length < max && d.waiters.length === 0) return slot(key, d, now);
      if (stuck(d, now)) return backOff(d, now);
      const dest = d;
      return new Promise<InFlightSlot>((resolve) => {
        dest.waiters.push({ resolve });
        watch(key, dest);
      });
    },
  };
}

/** The shortest and longest wait a delivery is told to take when its destination is at its bound. */
const MIN_WAIT_MS = 100;
const MAX_WAIT_MS = 5_000;

export type InFlightSlot = { taken: true; release: () => void } | { taken: false; waitMs: number };

export interface InFlightBound {
  /** A slot for one send to `key`, or how long to wait before asking again when `key` has `max` sends in flight. */
  take(key: string): InFlightSlot;
}

/**
 * At most `max` sends in flight per destination in this process, so a broker that accepts and
 * never confirms holds `max` of the worker's slots, not all of them. A delivery over the bound
 * is not queued here (it would hold its slot while waiting): the caller puts it back for the
 * wait returned, which grows with the age of the oldest send in flight: a fast destination at
 * its bound frees a slot within milliseconds, a hung one only at its deadline.
 */
export function createInFlightBound(max: number): InFlightBound {
  /** The start times of each key's sends in flight, oldest first. */
  const inFlight = new Map<string, number[]>();
  return {
    take(key) {
      const starts = inFlight.get(key) ?? [];
      const now = Date.now();
      if (starts.length >= max) {
        const oldestAge = now - starts[0];
        const wait = Math.min(MAX_WAIT_MS, Math.max(MIN_WAIT_MS, oldestAge));
        // Jittered, so the waiting deliveries of one destination do not come back together.
        return { taken: false, waitMs: Math.round(wait * (1 + Math.random() / 2)) };
      }
      starts.push(now);
      inFlight.set(key, starts);
      let released = false;
      return {
        taken: true,
        release() {
          if (released) return;
          released = true;
          starts.splice(starts.indexOf(now), 1);
          if (starts.length === 0 && inFlight.get(key) === starts) inFlight.delete(key);
        },
      };
    },
  };
}

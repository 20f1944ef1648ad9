import { isUnavailable } from './errors.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';

/** Where a process reports its connections' outages: its log and its metrics (a Deps will do). */
export interface ConnectionObserver {
  logger: Logger;
  metrics: Pick<Metrics, 'connectionLosses'>;
}

const SERVICE = { redis: 'Redis', postgres: 'PostgreSQL' } as const;
export type ConnectionKind = keyof typeof SERVICE;

/** One connection's outage as the watch tells it: `lost` and `restored` may be called on every attempt; each speaks once. */
export interface Outage {
  lost(err: string): void;
  restored(): void;
  readonly down: boolean;
}

/**
 * The outage reporting of one connection: a warn line and a counted loss
 * (`connection_losses_total{kind,name}`) when it is lost, an info line when it is back —
 * one each way, however many reconnect attempts fail in between. The counter's series exists
 * (at 0) from the start, so an alert on its increase needs no first loss to see it.
 */
export function watchOutage(kind: ConnectionKind, name: string, observer: ConnectionObserver): Outage {
  const labels = { kind, name };
  observer.metrics.connectionLosses.inc(labels, 0);
  let down = false;
  return {
    lost(err) {
      if (down) return;
      down = true;
      observer.metrics.connectionLosses.inc(labels);
      observer.logger.warn(
        { kind, connection: name, err },
        `${SERVICE[kind]} connection lost; what needs it waits or answers 503 until it is back`,
      );
    },
    restored() {
      if (!down) return;
      down = false;
      observer.logger.info({ kind, connection: name }, `${SERVICE[kind]} connection restored`);
    },
    get down() {
      return down;
    },
  };
}

/** Codes of a pool closed by this process (shutdown): nothing is lost, and nothing more is probed. */
const ENDED = new Set(['CONNECTION_ENDED', 'CONNECTION_DESTROYED']);

/**
 * The outage watch of a PostgreSQL pool; returns the hook the pool calls when one of its
 * connections closes (`onClose`, src/db.ts). postgres.js reconnects lazily and tells nothing of
 * a failed attempt but the query's error, so a close is the cue to ask: `probe` (a `SELECT 1`)
 * runs until it succeeds — every second at most while the server is unreachable, once after an
 * ordinary close (a connection's lifetime ran out). The first unreachable answer is the loss,
 * the first success after it the return. A pool too busy to probe is reachable; one this
 * process ended stops the probing.
 */
export function watchPool(name: string, observer: ConnectionObserver, probe: () => Promise<unknown>): () => void {
  const outage = watchOutage('postgres', name, observer);
  let probing = false;
  const run = async () => {
    for (let pause = 100; ; pause = Math.min(pause * 2, 1_000)) {
      try {
        await probe();
        return outage.restored();
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        if (typeof code === 'string' && ENDED.has(code)) return;
        if (isUnavailable(err) && code !== 'CONNECTION_QUEUE_TIMEOUT') outage.lost((err as Error).message);
        else if (!outage.down) return;
      }
      // Unref'd: probing never keeps a process alive that has nothing else to do.
      await new Promise((r) => setTimeout(r, pause).unref());
    }
  };
  return () => {
    if (probing) return;
    probing = true;
    void run().finally(() => (probing = false));
  };
}

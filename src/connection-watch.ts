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

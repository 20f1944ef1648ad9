import type { Deps } from '../deps.js';
import { catalogJob, enqueue, enqueueBulk } from '../queues.js';

export interface DeliveryRun {
  id: string;
  app_id: string;
  run: number;
  /** Attempts of the schedule already spent before this job (1 when the first attempt failed). */
  attempt_base?: number;
  /** Wait before the job's first run (ms). */
  delayMs?: number;
}

type EventRef = { event_id: string; app_id: string; trace?: string };

const uniqueEvents = (events: EventRef[]) => [...new Map(events.map((e) => [e.event_id, e])).values()];

/**
 * Queues the first attempts of each event's deliveries: one job per event, its id the event
 * id, so a repeat of the ledger job (or of this call) queues nothing new.
 */
export async function enqueueFirstAttempts(deps: Deps, events: EventRef[]): Promise<void> {
  const unique = uniqueEvents(events);
  if (unique.length === 0) return;
  await enqueueBulk(
    deps.queues,
    'webhook',
    unique.map((e) =>
      catalogJob(
        'webhook',
        { kind: 'first-attempts', event_id: e.event_id, app_id: e.app_id, ...(e.trace ? { trace: e.trace } : {}) },
        {},
        deps.config,
      ),
    ),
  );
}

/**
 * Queues the safety net of first attempts that started in this process (see fan-out.ts): one
 * job for the whole commit batch, run `delayMs` from now, which makes whatever first attempts
 * of these events are still missing then. Its id derives from the events, so a repeat of the
 * same batch queues nothing new (and a different batch finds the deliveries already made).
 */
export async function enqueueFirstAttemptsSafetyNet(deps: Deps, events: EventRef[], delayMs: number) {
  const unique = uniqueEvents(events);
  if (unique.length === 0) return undefined;
  const data = { kind: 'first-attempts-safety-net' as const, events: unique.map((e) => ({ event_id: e.event_id, app_id: e.app_id })) };
  return enqueue(deps.queues, 'webhook', data, { delay: delayMs }, deps.config);
}

/**
 * Queues further runs of single deliveries (retries after a failed first attempt, manual
 * retries, replays). Job ids are `(delivery, run)`: adding one already queued is a no-op.
 * Each job may take the attempts left in the schedule (the catalog's retry policy).
 */
export async function enqueueDeliveryRuns(deps: Deps, runs: DeliveryRun[]): Promise<void> {
  if (runs.length === 0) return;
  await enqueueBulk(
    deps.queues,
    'webhook',
    runs.map((r) =>
      catalogJob(
        'webhook',
        { kind: 'deliver', delivery_id: r.id, app_id: r.app_id, run: r.run, attempt_base: r.attempt_base ?? 0 },
        r.delayMs ? { delay: r.delayMs } : {},
        deps.config,
      ),
    ),
  );
}

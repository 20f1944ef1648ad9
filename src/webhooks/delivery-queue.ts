import type { Deps } from '../deps.js';
import { JOBS, type JobData } from '../queues.js';

export interface DeliveryRun {
  id: string;
  app_id: string;
  run: number;
  /** Attempts of the schedule already spent before this job (1 when the first attempt failed). */
  attempt_base?: number;
  /** Wait before the job's first run (ms). */
  delayMs?: number;
}

type EventRef = { event_id: string; app_id: string };

const uniqueEvents = (events: EventRef[]) => [...new Map(events.map((e) => [e.event_id, e])).values()];

// First-attempt jobs fail on faults (database, Redis), not on receiver answers: plain exponential retries.
const FIRST_ATTEMPT_RETRIES = { attempts: 8, backoff: { type: 'exponential', delay: 500 } };

/**
 * Queues the first attempts of each event's deliveries: one job per event, its id the event
 * id, so a repeat of the ledger job (or of this call) queues nothing new.
 */
export async function enqueueFirstAttempts(deps: Deps, events: EventRef[]): Promise<void> {
  const unique = uniqueEvents(events);
  if (unique.length === 0) return;
  await deps.queues.webhook.addBulk(
    unique.map((e) => {
      const data = JOBS.webhook.schema.parse({ event_id: e.event_id, app_id: e.app_id }) as JobData<'webhook'>;
      return { name: 'first-attempts', data, opts: { jobId: JOBS.webhook.jobId(data as never), ...FIRST_ATTEMPT_RETRIES } };
    }),
  );
}

/**
 * Queues the safety net of first attempts that started in this process (see fan-out.ts): one
 * job for the whole commit batch, run `delayMs` from now, which makes whatever first attempts
 * of these events are still missing then. Its id derives from the events, so a repeat of the
 * same batch queues nothing new (and a different batch finds the deliveries already made).
 */
export async function enqueueFirstAttemptsSafetyNet(deps: Deps, events: EventRef[], delayMs: number): Promise<void> {
  const unique = uniqueEvents(events);
  if (unique.length === 0) return;
  const data = JOBS.webhook.schema.parse({ events: unique.map((e) => ({ event_id: e.event_id, app_id: e.app_id })) }) as JobData<'webhook'>;
  await deps.queues.webhook.add('first-attempts-safety-net', data, { jobId: JOBS.webhook.jobId(data as never), delay: delayMs, ...FIRST_ATTEMPT_RETRIES });
}

/**
 * Queues further runs of single deliveries (retries after a failed first attempt, manual
 * retries, replays). Job ids are `(delivery, run)`: adding one already queued is a no-op.
 * Each job may take the attempts left in the schedule.
 */
export async function enqueueDeliveryRuns(deps: Deps, runs: DeliveryRun[]): Promise<void> {
  if (runs.length === 0) return;
  const schedule = deps.config.WEBHOOK_RETRY_DELAYS_MS;
  await deps.queues.webhook.addBulk(
    runs.map((r) => {
      const base = r.attempt_base ?? 0;
      const data = JOBS.webhook.schema.parse({ delivery_id: r.id, app_id: r.app_id, run: r.run, attempt_base: base }) as JobData<'webhook'>;
      return {
        name: 'deliver',
        data,
        opts: { jobId: JOBS.webhook.jobId(data as never), attempts: Math.max(1, schedule.length - base), ...(r.delayMs ? { delay: r.delayMs } : {}) },
      };
    }),
  );
}

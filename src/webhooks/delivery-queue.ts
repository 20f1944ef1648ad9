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

/**
 * Queues the first attempts of each event's deliveries: one job per event, its id the event
 * id, so a repeat of the ledger job (or of this call) queues nothing new. `delayMs` makes it
 * the safety net of an in-process first attempt (see fan-out.ts).
 */
export async function enqueueFirstAttempts(deps: Deps, events: { event_id: string; app_id: string }[], delayMs = 0): Promise<void> {
  const unique = [...new Map(events.map((e) => [e.event_id, e])).values()];
  if (unique.length === 0) return;
  await deps.queues.webhook.addBulk(
    unique.map((e) => {
      const data = JOBS.webhook.schema.parse({ event_id: e.event_id, app_id: e.app_id }) as JobData<'webhook'>;
      // Its failures are faults (database, Redis), not receiver answers: plain exponential retries.
      return { name: 'first-attempts', data, opts: { jobId: JOBS.webhook.jobId(data as never), attempts: 8, backoff: { type: 'exponential', delay: 500 }, ...(delayMs ? { delay: delayMs } : {}) } };
    }),
  );
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

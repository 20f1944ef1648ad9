import type { Deps } from '../deps.js';
import { JOBS, type JobData } from '../queues.js';

export interface DeliveryRef {
  id: string;
  app_id: string;
  run: number;
}

/**
 * Enqueues delivery jobs in one round trip. Job ids are `(delivery, run)`, so adding a job
 * that is already queued is a no-op; each job may take as many attempts as the schedule has.
 */
export async function enqueueDeliveries(deps: Deps, refs: DeliveryRef[]): Promise<void> {
  if (refs.length === 0) return;
  const attempts = deps.config.WEBHOOK_RETRY_DELAYS_MS.length;
  await deps.queues.webhook.addBulk(
    refs.map((r) => {
      const data = JOBS.webhook.schema.parse({ delivery_id: r.id, app_id: r.app_id, run: r.run }) as JobData<'webhook'>;
      return { name: 'deliver', data, opts: { jobId: JOBS.webhook.jobId(data as never), attempts } };
    }),
  );
}

import { DelayedError, type Job } from 'bullmq';
import type { Deps } from '../src/deps.js';
import type { JobData } from '../src/queues.js';
import { purgeOldLogs } from '../src/webhooks/attempt-log.js';
import { createDeliverer } from '../src/webhooks/deliver.js';
import { DeliveryAttemptError, retryDelay } from '../src/webhooks/retry-policy.js';
import type { ProcessorDef } from './host.js';

/** How often the log-retention task runs. */
const RETENTION_EVERY_MS = 3_600_000;

async function scheduleRetention(deps: Deps): Promise<void> {
  // Idempotent across processes: every worker upserts the same scheduler.
  await deps.queues.webhook.upsertJobScheduler('webhook-log-retention', { every: RETENTION_EVERY_MS }, { name: 'log-retention', data: { task: 'log-retention' } });
}

/**
 * The webhook queue: one attempt per job run. A failure that has attempts left is thrown as
 * a DeliveryAttemptError, and BullMQ schedules the next run through the custom `webhook`
 * backoff (WEBHOOK_RETRY_DELAYS_MS, Retry-After, jitter). Throttled deliveries move to
 * delayed without spending an attempt.
 */
export const webhookProcessor: ProcessorDef<'webhook'> = {
  queue: 'webhook',
  create(deps) {
    const deliverer = createDeliverer(deps);
    deps.closers.push(() => deliverer.close());
    scheduleRetention(deps).catch((err) => deps.logger.warn({ err }, 'could not schedule webhook log retention'));
    return async (job: Job, token?: string) => {
      const data = job.data as JobData<'webhook'>;
      if ('task' in data) return purgeOldLogs(deps);
      const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      const outcome = await deliverer.attempt({ deliveryId: data.delivery_id, appId: data.app_id, run: data.run, lastAttempt });
      switch (outcome.kind) {
        case 'wait':
          await job.moveToDelayed(Date.now() + outcome.ms, token);
          throw new DelayedError();
        case 'retry':
          throw new DeliveryAttemptError(outcome.error, outcome.retryAfterMs);
        default:
          return outcome;
      }
    };
  },
  options: (deps) => ({
    concurrency: deps.config.WEBHOOK_CONCURRENCY,
    settings: {
      backoffStrategy: (attemptsMade: number, _type?: string, err?: Error) =>
        retryDelay(deps.config.WEBHOOK_RETRY_DELAYS_MS, attemptsMade, err instanceof DeliveryAttemptError ? err.retryAfterMs : undefined),
    },
  }),
};

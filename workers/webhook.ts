import { DelayedError } from 'bullmq';
import type { Deps } from '../src/deps.js';
import { queueFor } from '../src/queues.js';
import { purgeOldLogs } from '../src/webhooks/attempt-log.js';
import { SAFETY_NET_MARGIN_MS } from '../src/webhooks/fan-out.js';
import { createJobClaims } from '../src/webhooks/job-claims.js';
import { DeliveryAttemptError, retryDelay } from '../src/webhooks/retry-policy.js';
import type { ProcessorDef } from './host.js';

type Processor = ReturnType<ProcessorDef<'webhook'>['create']>;

/**
 * Webhook log retention is a maintenance task now (`prune-webhook-logs`): on this queue it
 * took a delivery slot and waited behind a backlog of deliveries, just when the logs grow
 * fastest. The scheduler an older release upserted here is removed (idempotent).
 */
async function unscheduleRetention(deps: Deps): Promise<void> {
  // Under QUEUE_SHARDS=1 shard 0 is the queue where it was scheduled.
  await queueFor(deps.queues, 'webhook').removeJobScheduler('webhook-log-retention');
}

/**
 * The webhook queue. An event's job (or a commit batch's safety-net job, for each of its
 * events) makes the first attempt of each of its deliveries; a delivery that fails it
 * continues as a job of its own, one attempt per run: a failure with attempts left is thrown as a DeliveryAttemptError and BullMQ schedules the next run through
 * the custom `webhook` backoff (WEBHOOK_RETRY_DELAYS_MS, Retry-After, jitter). Throttled
 * deliveries move to delayed without spending an attempt.
 */
export const webhookProcessor: ProcessorDef<'webhook'> = {
  queue: 'webhook',
  create(deps, services) {
    const deliverer = services.webhooks;
    unscheduleRetention(deps).catch((err) => deps.logger.warn({ err }, 'could not remove the old webhook log retention scheduler'));
    // As long as the first-attempts safety net waits: longer than any run of a live worker.
    const claims = createJobClaims(deps.redis, deps.config.WEBHOOK_TIMEOUT_MS + SAFETY_NET_MARGIN_MS, (err) =>
      deps.logger.debug({ err }, 'could not release a webhook job claim; it lapses by itself'),
    );
    const claimed: Processor = async (job, token) => {
      // Handed out again while another process's run of it may still be sending: left until that run ends.
      const othersLeft = await claims.take(job);
      if (othersLeft > 0) {
        deps.logger.info(
          { jobId: job.id, ms: othersLeft },
          'webhook job taken over from a worker whose run may still be going; delayed until it ends',
        );
        await job.moveToDelayed(Date.now() + othersLeft, token);
        throw new DelayedError();
      }
      try {
        return await run(job, token);
      } finally {
        claims.release(job);
      }
    };
    const run: Processor = async (job, token) => {
      const data = job.data;
      switch (data.kind) {
        case 'log-retention':
          return purgeOldLogs(deps);
        case 'first-attempts': {
          const outcomes = await deliverer.firstAttempts({ eventId: data.event_id, appId: data.app_id, trace: data.trace });
          return { attempts: outcomes.length };
        }
        case 'first-attempts-safety-net': {
          const outcomes = await Promise.all(data.events.map((e) => deliverer.firstAttempts({ eventId: e.event_id, appId: e.app_id })));
          return { attempts: outcomes.reduce((n, o) => n + o.length, 0) };
        }
        case 'deliver': {
          const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
          const outcome = await deliverer.attempt({
            deliveryId: data.delivery_id,
            appId: data.app_id,
            run: data.run,
            lastAttempt,
            schedulePosition: job.attemptsMade + 1 + data.attempt_base,
            queuedAt: job.timestamp,
          });
          switch (outcome.kind) {
            case 'wait':
              await job.moveToDelayed(Date.now() + outcome.ms, token);
              throw new DelayedError();
            case 'retry':
              throw new DeliveryAttemptError(outcome.error, outcome.retryAfterMs, outcome.delayMs);
            default:
              return outcome;
          }
        }
      }
    };
    return claimed;
  },
  options: (deps) => ({
    concurrency: deps.config.WEBHOOK_CONCURRENCY,
    settings: {
      // A run that started after a failed first attempt is `attempt_base` steps into the schedule.
      // The attempt decided its delay already (its log shows the time); the schedule is the fallback.
      backoffStrategy: (attemptsMade: number, _type?: string, err?: Error, job?: { data?: { attempt_base?: number } }) =>
        (err instanceof DeliveryAttemptError ? err.delayMs : undefined) ??
        retryDelay(
          deps.config.WEBHOOK_RETRY_DELAYS_MS,
          attemptsMade + (job?.data?.attempt_base ?? 0),
          err instanceof DeliveryAttemptError ? err.retryAfterMs : undefined,
        ),
    },
  }),
};

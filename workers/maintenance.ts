import type { Deps } from '../src/deps.js';
import { MAINTENANCE_TASKS, queueFor } from '../src/queues.js';
import { MAINTENANCE } from '../src/retention/tasks.js';
import type { ProcessorDef } from './host.js';

/** How often each maintenance task runs: hourly keeps every chunked prune small. */
const MAINTENANCE_EVERY_MS = 3_600_000;

/** Idempotent across processes: every worker upserts the same scheduler per task. */
async function scheduleMaintenance(deps: Deps): Promise<void> {
  for (const task of MAINTENANCE_TASKS) {
    await queueFor(deps.queues, 'maintenance').upsertJobScheduler(
      `maintenance-${task}`,
      { every: MAINTENANCE_EVERY_MS },
      { name: task, data: { task } },
    );
  }
}

/**
 * The maintenance queue: retention (src/retention/registry.ts) and upkeep on a schedule, one
 * task per job, one job at a time per process (they are background work sharing the pool).
 */
export const maintenanceProcessor: ProcessorDef<'maintenance'> = {
  queue: 'maintenance',
  create(deps, services) {
    scheduleMaintenance(deps).catch((err) => deps.logger.warn({ err }, 'could not schedule maintenance tasks'));
    return async (job) => {
      const { task } = job.data;
      const done = await MAINTENANCE[task](deps, services.files);
      deps.logger.info({ task, done }, 'maintenance task ran');
      return done;
    };
  },
  options: () => ({ concurrency: 1 }),
};

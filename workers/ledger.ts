import type { Deps } from '../src/deps.js';
import { createGroupCommit } from '../src/ledger/group-commit.js';
import { publishWakes } from '../src/ledger/wake.js';
import { writeEvents, type CommittedEvent } from '../src/ledger/write.js';
import type { JobData, LedgerEvent } from '../src/queues.js';
import type { ProcessorDef } from './host.js';
import { fanOutCommitted } from '../src/webhooks/fan-out.js';
import { recordParticipants } from '../src/conversations/participants.js';

/** Runs after each commit (webhook fan-out registers here); must be idempotent per event. */
export type AfterCommit = (deps: Deps, committed: CommittedEvent[]) => Promise<void>;
export const AFTER_COMMIT: AfterCommit[] = [fanOutCommitted, recordParticipants];

/**
 * The ledger queue: many jobs share one transaction (group commit). Each job resolves only
 * after its batch has committed, the wakes are published and the after-commit hooks ran; a
 * failure anywhere fails every job of the batch, and their retries write nothing twice.
 */
export const ledgerProcessor: ProcessorDef<'ledger'> = {
  queue: 'ledger',
  create(deps) {
    const commit = createGroupCommit<LedgerEvent, CommittedEvent[]>(async (events) => {
      const committed = await writeEvents(deps.sql, events);
      deps.metrics.ledgerBatchSize.observe(events.length);
      // Independent round trips: wakes and the after-commit hooks go out together.
      await Promise.all([publishWakes(deps.redis, deps.config.REDIS_PREFIX, committed), ...AFTER_COMMIT.map((hook) => hook(deps, committed))]);
      return committed;
    }, deps.config.LEDGER_BATCH_MAX);
    return async (job) => {
      const { event } = job.data as JobData<'ledger'>;
      const committed = await commit(event);
      const mine = committed.find((c) => c.id === event.id);
      return { seq: mine?.seq };
    };
  },
  // Group commit needs many jobs in flight at once; they are cheap (each awaits one shared flush).
  options: (deps) => ({ concurrency: Math.max(deps.config.WORKER_CONCURRENCY, deps.config.LEDGER_BATCH_MAX) }),
};

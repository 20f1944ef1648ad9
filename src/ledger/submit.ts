import type { Deps } from '../deps.js';
import { describeItemFault, isItemFault } from '../errors.js';
import { enqueue, type LedgerEvent } from '../queues.js';
import { isNotReplicated } from '../redis-durability.js';
import type { CommitOutcome, CommitWaiter } from './commit-waiter.js';
import { createGroupCommit } from './group-commit.js';

/** The most events one ledger job carries. */
const ENQUEUE_BATCH_MAX = 200;

export interface LedgerSubmitter {
  /**
   * Enqueues `event` on the ledger and waits (bounded) for its commit: where it landed, why
   * it cannot be queued or the database refused it for good (`refused`), or undefined when it was not committed
   * within `timeoutMs` (it stays queued). Throws the UNAVAILABLE AppError when it could not be
   * enqueued, or when no Redis replica confirmed it (REDIS_WAIT_REPLICAS) and it was not
   * committed within `timeoutMs` either.
   */
  submit(event: LedgerEvent, timeoutMs: number): Promise<CommitOutcome | undefined>;
}

/**
 * The web process's way into the ledger. Events submitted while an enqueue is under way go
 * together in the next ledger job (under load, batches grow on their own; when idle, each
 * goes at once), and the worker answers each job with one commit report to this process.
 * Every event is in Redis before its caller hears anything, and a caller hears "committed"
 * only after the ledger commit, so batching changes no guarantee.
 */
export function createLedgerSubmitter(deps: Deps, replyTo: string, commits: CommitWaiter<CommitOutcome>): LedgerSubmitter {
  const enqueueBatch = createGroupCommit<LedgerEvent, void>(async (events) => {
    await enqueue(deps.queues, 'ledger', { events, reply_to: replyTo });
  }, ENQUEUE_BATCH_MAX);
  return {
    async submit(untraced, timeoutMs) {
      // Its request's span, which its commit and deliveries link back to (the job is shared).
      const trace = deps.tracing?.traceparent();
      const event = trace ? { ...untraced, trace } : untraced;
      const committed = commits.wait(event.app_id, event.id, timeoutMs);
      try {
        await enqueueBatch(event);
      } catch (err) {
        // On its master but on no replica: not safe to call queued, but a commit within the
        // wait is in PostgreSQL, which no Redis failover can take back (a 201).
        if (isNotReplicated(err)) {
          const outcome = await committed;
          if (outcome) return outcome;
          throw err;
        }
        commits.settle(event.app_id, event.id, undefined);
        // Its own fault (it cannot be serialised into a job): refused, as the ledger would.
        if (isItemFault(err)) return { refused: describeItemFault(err) };
        throw err;
      }
      return committed;
    },
  };
}

import { UnrecoverableError } from 'bullmq';
import { withDeadline } from '../src/availability.js';
import type { Deps } from '../src/deps.js';
import { describeItemFault, isPermanentItemFault } from '../src/errors.js';
import { addCommitReports, addRefusalReport, reportChannels } from '../src/ledger/commit-reports.js';
import { createGroupCommit } from '../src/ledger/group-commit.js';
import { addWakes, wakeChannels } from '../src/ledger/wake.js';
import { type Outgoing, publishAll } from '../src/pubsub.js';
import { writeEvents, type CommittedEvent } from '../src/ledger/write.js';
import type { LedgerEvent } from '../src/queues.js';
import type { ProcessorDef } from './host.js';
import type { WorkerServices } from './services.js';
import { fanOutCommitted } from '../src/webhooks/fan-out.js';
import { recordParticipants } from '../src/conversations/participants.js';

/** Runs after each commit (webhook fan-out registers here); must be idempotent per event. */
export type AfterCommit = (deps: Deps, services: WorkerServices, committed: CommittedEvent[]) => Promise<void>;
const AFTER_COMMIT: AfterCommit[] = [fanOutCommitted, (deps, _services, committed) => recordParticipants(deps, committed)];

/**
 * Fails a job for good whose events the database refused, after telling the web process
 * waiting on them why (it answers 400 instead of waiting out its bound).
 */
async function refuse(deps: Deps, replyTo: string | undefined, refused: { app_id: string; id: string; reason: string }[]): Promise<never> {
  if (replyTo) {
    const out: Outgoing[] = [];
    addRefusalReport(out, reportChannels(deps.config), replyTo, refused);
    await publishAll(deps.redis, reportChannels(deps.config), out);
  }
  throw new UnrecoverableError(`ledger refused ${refused.map((r) => `event ${r.id} (application ${r.app_id}): ${r.reason}`).join('; ')}`);
}

/** One event to commit, and the web process waiting for its commit report, if any. */
interface Pending {
  event: LedgerEvent;
  replyTo?: string;
  /** Tracing on: the traceparent of its job's consumer span. */
  job?: string;
}

/**
 * The span of one group commit (tracing on): the child of its first job's span, linked to every
 * other job and to the request of every event (LedgerEvent.trace), since it serves them all.
 */
function tracedCommit(deps: Deps, flush: (items: Pending[]) => Promise<CommittedEvent[]>) {
  const tracing = deps.tracing;
  if (!tracing) return flush;
  return (items: Pending[]) => {
    const parent = items[0].job;
    const links = [...new Set(items.flatMap((p) => [p.job, p.event.trace]))].filter((t) => t && t !== parent);
    const attributes = {
      'gateway.ledger.events': items.length,
      'gateway.event_ids': items.slice(0, 100).map((p) => p.event.id),
    };
    return tracing.span('ledger commit', { parent, links, attributes }, () => flush(items));
  };
}

/**
 * The ledger queue: many jobs share one transaction (group commit); a job may itself carry
 * many events (a web process's batch). Each job resolves only after all its events have
 * committed, the wakes and commit reports are published and the after-commit hooks ran; a
 * failure anywhere fails every job of the batch, and their retries write nothing twice. When
 * the database refuses one event's data, the group commit splits the batch until that event is
 * alone, so the others commit (and are reported) while only the job holding the bad one fails
 * — for good, as no retry can store it: it waits in the failed set (the dead letter) for an
 * operator, and the web process waiting on it hears why.
 */
export const ledgerProcessor: ProcessorDef<'ledger'> = {
  queue: 'ledger',
  create(deps, services) {
    deps.metrics.ledgerProgress.started();
    const flush = async (items: Pending[]): Promise<CommittedEvent[]> => {
      // The group commit runs one flush at a time: a write that never settled would stall every
      // later ledger job of this process. The driver no longer strands one (patches/), so this
      // bound is only a safety net: past it the jobs fail as UNAVAILABLE and retry; a write
      // that lands late anyway is harmless (ids are written once, positions under the head's row lock).
      const write = writeEvents(
        deps.sql,
        items.map((p) => p.event),
        { idleMs: deps.config.LEDGER_IDLE_TIMEOUT_MS, lockMs: deps.config.LEDGER_LOCK_TIMEOUT_MS },
      );
      const bound = deps.config.LEDGER_WRITE_DEADLINE_MS;
      const committed = await (bound > 0 ? withDeadline(write, bound, 'PostgreSQL') : write);
      // Tracing on: each event continues (its deliveries) in its request's trace, else its job's.
      if (deps.tracing) {
        const traceOf = new Map(items.map((p) => [p.event.id, p.event.trace ?? p.job]));
        for (const c of committed) c.trace = traceOf.get(c.id);
      }
      deps.metrics.ledgerBatchSize.observe(items.length);
      deps.metrics.ledgerProgress.committed();
      const replyTo = new Map<string, string>();
      for (const p of items) if (p.replyTo) replyTo.set(p.event.id, p.replyTo);
      const out: Outgoing[] = [];
      addWakes(out, wakeChannels(deps.config), committed);
      addCommitReports(out, reportChannels(deps.config), committed, replyTo);
      // Independent round trips: wakes, reports and the after-commit hooks go out together.
      await Promise.all([
        publishAll(deps.redis, wakeChannels(deps.config), out),
        ...AFTER_COMMIT.map((hook) => hook(deps, services, committed)),
      ]);
      return committed;
    };
    const commit = createGroupCommit<Pending, CommittedEvent[]>(tracedCommit(deps, flush), deps.config.LEDGER_BATCH_MAX);
    return async (job) => {
      const data = job.data;
      const span = deps.tracing?.traceparent();
      const items: Pending[] =
        'event' in data ? [{ event: data.event, job: span }] : data.events.map((event) => ({ event, replyTo: data.reply_to, job: span }));
      const settled = await Promise.allSettled(items.map((p) => commit(p)));
      const faults = settled.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
      const retryable = faults.find((err) => !isPermanentItemFault(err));
      // Retried whole: the events that did commit are written once, and reported again.
      if (retryable !== undefined) throw retryable;
      if (faults.length) {
        const refused = items.flatMap((p, i) => {
          const r = settled[i];
          return r.status === 'rejected' ? [{ app_id: p.event.app_id, id: p.event.id, reason: describeItemFault(r.reason) }] : [];
        });
        return refuse(deps, 'reply_to' in data ? data.reply_to : undefined, refused);
      }
      const results = settled.map((r) => (r as PromiseFulfilledResult<CommittedEvent[]>).value);
      const seqs = items.map((p, i) => results[i].find((c) => c.id === p.event.id)?.seq);
      return 'event' in data ? { seq: seqs[0] } : { seqs };
    };
  },
  // Group commit needs many jobs in flight at once; they are cheap (each awaits one shared flush).
  options: (deps) => ({ concurrency: Math.max(deps.config.WORKER_CONCURRENCY, deps.config.LEDGER_BATCH_MAX) }),
};

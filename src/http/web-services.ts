import { randomUUID } from 'node:crypto';
import { createChangeStamps, type ChangeStamps } from '../change-stamps.js';
import { createConnectionCache, type ConnectionCache } from '../connections/connection-cache.js';
import type { Deps } from '../deps.js';
import { createFileStore, type BlobStore } from '../files/storage.js';
import { createGuessThrottle, type GuessThrottle } from '../identity/link-code-throttle.js';
import { reportChannels, subscribeCommitReports, type CommitReportSubscription, type SendOutcome } from '../ledger/commit-reports.js';
import { createCommitWaiter, eventCommitted, type CommitOutcome, type CommitWaiter } from '../ledger/commit-waiter.js';
import { createLedgerSubmitter, type LedgerSubmitter } from '../ledger/submit.js';
import { createWakeHub, type WakeHub } from '../ledger/wake-hub.js';
import { wakeChannels } from '../ledger/wake.js';
import { messageOutcome } from '../messages/messages.js';
import { createMessageRecorder, type MessageRecorder } from '../messages/record.js';
import { createStreamService, type StreamService } from '../stream/service.js';

/** What the web process builds once and its faces share: the wake subscriber and what listens on it, and the per-process caches. */
export interface WebServices {
  wakes: WakeHub;
  /** This process's reports from the workers (event commits, settled sends), on its own channel. */
  reports: CommitReportSubscription;
  /** Enqueues events on the ledger and waits for their commit. */
  ledger: LedgerSubmitter;
  /** Records the sends of one event-loop turn together and hands them to the send workers. */
  recorder: MessageRecorder;
  /** Waits for sends to settle (sent or finally failed), settled by the send workers' reports. */
  sends: CommitWaiter<SendOutcome>;
  /** Event-stream tails, slots and open streams (SSE and GraphQL subscriptions). */
  streams: StreamService;
  /** The change stamps and the caches under them (API keys, event schemas). */
  stamps: ChangeStamps;
  /** Platform connections as sends validate against them. */
  connections: ConnectionCache;
  /** Where uploaded file bytes go (undefined: PostgreSQL). */
  files: BlobStore | undefined;
  /** The guessing budget of link-code activations. */
  linkCodes: GuessThrottle;
}

export function createWebServices(deps: Deps): WebServices {
  const wakes = createWakeHub(deps.config.redis, wakeChannels(deps.config), deps);
  const stamps = createChangeStamps(deps.sql);
  // The workers answer this process directly; the waiters' periodic checks of the database
  // only cover a report that got lost.
  const replyTo = randomUUID();
  const commits = createCommitWaiter<CommitOutcome>(deps.sql, undefined, eventCommitted);
  const sends = createCommitWaiter<SendOutcome>(deps.sql, undefined, messageOutcome);
  const reports = subscribeCommitReports(deps.config.redis, reportChannels(deps.config), replyTo, deps, {
    commit: commits.settle,
    send: sends.settle,
  });
  return {
    wakes,
    reports,
    ledger: createLedgerSubmitter(deps, replyTo, commits),
    recorder: createMessageRecorder(deps, replyTo),
    sends,
    streams: createStreamService(deps, wakes, stamps),
    stamps,
    connections: createConnectionCache(deps),
    files: createFileStore(deps.config),
    linkCodes: createGuessThrottle(deps),
  };
}

import type { Deps } from '../deps.js';
import { createCommitWaiter, type CommitWaiter } from '../ledger/commit-waiter.js';
import { createLedgerSubmitter, type LedgerSubmitter } from '../ledger/submit.js';
import { createWakeHub, type WakeHub } from '../ledger/wake-hub.js';
import { messageSettled } from '../messages/messages.js';
import { createStreamService, type StreamService } from '../stream/service.js';

/** What only the web process has: the wake subscriber and what listens on it. */
export interface WebServices {
  wakes: WakeHub;
  /** Enqueues events on the ledger and waits for their commit. */
  ledger: LedgerSubmitter;
  /** Waits for sends to settle (sent or finally failed). */
  sends: CommitWaiter;
  /** Event-stream tails, slots and open streams (SSE and GraphQL subscriptions). */
  streams: StreamService;
}

export function createWebServices(deps: Deps): WebServices {
  const wakes = createWakeHub(deps.config.REDIS_URL, deps.config.REDIS_PREFIX, deps.logger);
  return {
    wakes,
    ledger: createLedgerSubmitter(deps),
    sends: createCommitWaiter(deps.sql, wakes, messageSettled),
    streams: createStreamService(deps, wakes),
  };
}

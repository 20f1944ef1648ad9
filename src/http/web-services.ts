import { createChangeStamps, type ChangeStamps } from '../change-stamps.js';
import { createConnectionCache, type ConnectionCache } from '../connections/connection-cache.js';
import type { Deps } from '../deps.js';
import { createFileStore, type BlobStore } from '../files/storage.js';
import { createGuessThrottle, type GuessThrottle } from '../identity/link-code-throttle.js';
import { createCommitWaiter, type CommitWaiter } from '../ledger/commit-waiter.js';
import { createLedgerSubmitter, type LedgerSubmitter } from '../ledger/submit.js';
import { createWakeHub, type WakeHub } from '../ledger/wake-hub.js';
import { messageSettled } from '../messages/messages.js';
import { createStreamService, type StreamService } from '../stream/service.js';

/** What the web process builds once and its faces share: the wake subscriber and what listens on it, and the per-process caches. */
export interface WebServices {
  wakes: WakeHub;
  /** Enqueues events on the ledger and waits for their commit. */
  ledger: LedgerSubmitter;
  /** Waits for sends to settle (sent or finally failed). */
  sends: CommitWaiter;
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
  const wakes = createWakeHub(deps.config.REDIS_URL, deps.config.REDIS_PREFIX, deps.logger);
  const stamps = createChangeStamps(deps.sql);
  return {
    wakes,
    ledger: createLedgerSubmitter(deps),
    sends: createCommitWaiter(deps.sql, wakes, messageSettled),
    streams: createStreamService(deps, wakes, stamps),
    stamps,
    connections: createConnectionCache(deps),
    files: createFileStore(deps.config),
    linkCodes: createGuessThrottle(deps),
  };
}

import type { QueueName } from '../src/config.js';
import { createConnectionCache, type ConnectionCache } from '../src/connections/connection-cache.js';
import type { Deps } from '../src/deps.js';
import { createFileStore, type BlobStore } from '../src/files/storage.js';
import { createGuessThrottle, type GuessThrottle } from '../src/identity/link-code-throttle.js';
import { createDeliverer, type Deliverer } from '../src/webhooks/deliver.js';
import type { LocalFirstAttempts } from '../src/webhooks/local-deliverer.js';
import { createSubscriptionCache, type SubscriptionCache } from '../src/webhooks/subscription-cache.js';

/**
 * What a worker process builds once and hands to every processor (beside the dependencies):
 * the per-process caches, clients and budgets the queues share.
 */
export interface WorkerServices {
  /** Each application's webhook subscriptions: the ledger's fan-out matches with it, the webhook worker signs with it. */
  subscriptions: SubscriptionCache;
  /** Makes webhook attempts (the webhook queue's jobs, and first attempts handed over in process). */
  webhooks: Deliverer;
  /**
   * Where the ledger's fan-out hands first attempts when this process also runs the webhook
   * queue (no queue round trip); undefined otherwise, and every delivery goes through the queue.
   */
  localFirstAttempts: LocalFirstAttempts | undefined;
  /** Platform connections as the send worker calls them. */
  connections: ConnectionCache;
  /** Where file bytes go (undefined: PostgreSQL). */
  files: BlobStore | undefined;
  /** The guessing budget of link codes sent as messages. */
  linkCodes: GuessThrottle;
  /** Closes what the services opened; after the workers have stopped. */
  close(): Promise<void>;
}

/** The services of a worker process running `queues`. */
export function createWorkerServices(deps: Deps, queues: readonly QueueName[]): WorkerServices {
  const subscriptions = createSubscriptionCache(deps);
  const webhooks = createDeliverer(deps, subscriptions);
  return {
    subscriptions,
    webhooks,
    localFirstAttempts: queues.includes('webhook') ? webhooks.local(deps.config.WEBHOOK_CONCURRENCY) : undefined,
    connections: createConnectionCache(deps),
    files: createFileStore(deps.config),
    linkCodes: createGuessThrottle(deps),
    async close() {
      await Promise.allSettled([webhooks.close(), subscriptions.close()]);
    },
  };
}

import type { Connection } from '../connections/connections.js';
import type { Deps } from '../deps.js';
import { getAdapter } from '../platforms/registry.js';
import { catalogJob, enqueueBulk } from '../queues.js';
import { deliveryJob, ownDelivery } from './delivery-job.js';

/** A send the platform accepted and the ledger recorded. */
export interface RecordedSend {
  conn: Connection;
  externalMessageId: string;
  to: string;
}

/**
 * Queues what a platform reports on its own about sends it accepted (the sandbox's delivered
 * and read) as delayed inbound jobs: BullMQ holds them until they are due, in Redis, so they
 * survive restarts and need no timer in any process, and the inbound worker records them as it
 * records every platform's status webhook. Ids are derived from the delivery, so a repeat
 * (a re-driven send) queues nothing twice. Platforms without such reports cost one lookup.
 */
export async function scheduleDeliveries(deps: Pick<Deps, 'queues'>, sends: RecordedSend[], sentAt = Date.now()): Promise<void> {
  const now = Date.now();
  const jobs = sends.flatMap(({ conn, externalMessageId, to }) =>
    (getAdapter(conn.platform).reportsAfterSend?.(conn.config, { externalMessageId, to, sentAt }) ?? []).flatMap((d) => {
      const due = sentAt + d.delayMs;
      const data = deliveryJob(conn, ownDelivery(d.rawBody, due));
      return data ? [catalogJob('inbound', data, { delay: Math.max(0, due - now) })] : [];
    }),
  );
  if (jobs.length) await enqueueBulk(deps.queues, 'inbound', jobs);
}

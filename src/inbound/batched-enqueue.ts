import { catalogJob, enqueueBulk, type JobData, type Queues } from '../queues.js';
import { tickBatch } from '../tick-batch.js';

/** A burst larger than this goes out in several pipelines rather than one huge one. */
const MAX_BATCH = 256;

/**
 * Enqueues inbound deliveries accepted in the same turn of the event loop together: one
 * pipeline of adds instead of one Redis round trip each. A caller's promise resolves only
 * once Redis answered that the whole batch is stored, so the receiver still acknowledges a
 * delivery only after its job is in Redis; if the batch fails, every caller in it fails
 * (the platform retries, and the dedupe job id absorbs any job that did get stored). Batches
 * overlap (not serial): the inbound bench measured ack p99 46 ms one batch at a time vs 38 ms.
 */
export function batchedEnqueue(queues: Queues): (data: JobData<'inbound'>) => Promise<void> {
  const add = tickBatch<ReturnType<typeof catalogJob<'inbound'>>, void>(
    async (jobs) => {
      await enqueueBulk(queues, 'inbound', jobs);
      return jobs.map(() => undefined);
    },
    { maxBatch: MAX_BATCH },
  );
  return async (data) => add(catalogJob('inbound', data));
}

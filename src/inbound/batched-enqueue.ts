import { createGroupCommit } from '../ledger/group-commit.js';
import { catalogJob, enqueueBulk, type JobData, type Queues } from '../queues.js';

/** A burst larger than this goes out in several pipelines rather than one huge one. */
const MAX_BATCH = 256;

/**
 * Enqueues inbound deliveries that arrive together as one pipeline of adds instead of one
 * Redis round trip each (the same group commit the ledger submitter uses). A caller's promise
 * resolves only once Redis answered that its batch is stored, so the receiver still
 * acknowledges a delivery only after its job is in Redis; if the batch fails, its callers
 * fail (the platform retries, and the dedupe job id absorbs any job that did get stored).
 */
export function batchedEnqueue(queues: Queues): (data: JobData<'inbound'>) => Promise<void> {
  const enqueue = createGroupCommit((jobs: ReturnType<typeof catalogJob<'inbound'>>[]) => enqueueBulk(queues, 'inbound', jobs).then(() => undefined), MAX_BATCH);
  return (data) => enqueue(catalogJob('inbound', data));
}

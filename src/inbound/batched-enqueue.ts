import { catalogJob, enqueueBulk, type JobData, type Queues } from '../queues.js';

/** A burst larger than this goes out in several pipelines rather than one huge one. */
const MAX_BATCH = 256;

/**
 * Enqueues inbound deliveries accepted in the same turn of the event loop together: one
 * pipeline of adds instead of one Redis round trip each. A caller's promise resolves only
 * once Redis answered that the whole batch is stored, so the receiver still acknowledges a
 * delivery only after its job is in Redis; if the batch fails, every caller in it fails
 * (the platform retries, and the dedupe job id absorbs any job that did get stored).
 */
export function batchedEnqueue(queues: Queues): (data: JobData<'inbound'>) => Promise<void> {
  let pending: { job: ReturnType<typeof catalogJob<'inbound'>>; resolve(): void; reject(err: unknown): void }[] = [];
  const flush = () => {
    const batch = pending;
    if (batch.length === 0) return;
    pending = [];
    enqueueBulk(
      queues,
      'inbound',
      batch.map((p) => p.job),
    ).then(
      () => batch.forEach((p) => p.resolve()),
      (err) => batch.forEach((p) => p.reject(err)),
    );
  };
  return (data) =>
    new Promise<void>((resolve, reject) => {
      const job = catalogJob('inbound', data);
      const n = pending.push({ job, resolve, reject });
      // setImmediate runs after every request the current poll phase read: they share the trip.
      if (n === 1) setImmediate(flush);
      else if (n >= MAX_BATCH) flush();
    });
}

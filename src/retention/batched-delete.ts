/** Rows one pruning statement deletes at most. */
const PRUNE_BATCH = 5000;

/**
 * Runs `chunk(limit)` — one DELETE of at most `limit` rows, returning how many it deleted —
 * until a chunk comes back short. Each chunk is its own short statement and transaction, so
 * a pruner never holds locks on a big range for long, never runs into the statement timeout,
 * and lets vacuum reclaim space as it goes, however much has piled up.
 */
export async function deleteInBatches(chunk: (limit: number) => Promise<number>, limit = PRUNE_BATCH): Promise<number> {
  let total = 0;
  for (;;) {
    const n = await chunk(limit);
    total += n;
    if (n < limit) return total;
  }
}

import { restReplica, replicaResting, type Sql } from './db.js';
import type { Deps } from './deps.js';
import { AppError } from './errors.js';

/**
 * The one rule for read-only requests (REST GETs, GraphQL queries) when DATABASE_READ_URL names
 * a streaming replica (docs/SCALING.md, "Read replicas"):
 *
 * - they read from the replica, unless their application wrote moments ago and the replica has
 *   not replayed that write yet (read-your-writes: a client that created something and lists
 *   at once sees it; `noteWrite` below);
 * - a by-id read that misses there (NOT_FOUND) runs again on the primary: the row may be one a
 *   201 just announced, or one another client of the application wrote;
 * - when the replica fails, the request runs again on the primary and reads skip the replica
 *   for a while (src/db.ts `restReplica`): the service answers without it.
 *
 * Everything else (writes, and the reads of a write: read-modify-write) stays on the primary,
 * because only a read-only request's view is ever pointed at the replica.
 */

/**
 * How long an application's last write position is kept (ms). A replica further behind than
 * this lets that application's listings miss its own writes (the lag gauge shows it first).
 */
const WRITE_MARK_TTL_MS = 60_000;

const markKey = (deps: Deps, appId: string) => `${deps.config.REDIS_PREFIX}:written:${appId}`;

/** Keeps the higher of the stored and the given position, and renews the mark's time to live. */
const RAISE_MARK = `
local cur = tonumber(redis.call('GET', KEYS[1]))
local lsn = tonumber(ARGV[1])
if cur and cur > lsn then lsn = cur end
redis.call('SET', KEYS[1], tostring(lsn), 'PX', ARGV[2])
return 1`;

const replicated = (deps: Deps) => deps.readSql !== deps.sql;

/**
 * Records, after a request of `appId` that may have written, how far the primary's WAL then
 * reached: until the replica has replayed that far, the application's reads go to the primary.
 * A failure is logged, never the request's: what it wrote is committed.
 */
export async function noteWrite(deps: Deps, appId: string): Promise<void> {
  if (!replicated(deps)) return;
  try {
    // The insert position covers every WAL record written so far, the request's commit among them.
    const [{ lsn }] = await deps.sql<{ lsn: number }[]>`SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::float8 AS lsn`;
    await deps.redis.eval(RAISE_MARK, 1, markKey(deps, appId), String(lsn), String(WRITE_MARK_TTL_MS));
  } catch (err) {
    deps.logger.warn({ err, appId }, 'could not record the write position: reads may miss this write until the replica replays it');
  }
}

/** `deps` with its reads pointed at `reader`; `pools.sql` stays the primary for the ledger's own rule. */
const readingFrom = (deps: Deps, reader: Sql): Deps => ({ ...deps, sql: reader, pools: { sql: deps.sql, readSql: reader } });

type ServedBy = 'replica' | 'written' | 'resting';

/** Which pool a read-only request of `appId` reads from, and why. */
async function chooseReader(deps: Deps, appId: string): Promise<ServedBy> {
  if (replicaResting(deps.readSql)) return 'resting';
  let mark: string | null;
  try {
    mark = await deps.redis.get(markKey(deps, appId));
  } catch {
    // Without the mark nobody can tell whether the replica has the application's writes.
    return 'written';
  }
  if (mark === null) return 'replica';
  try {
    const [{ caught }] = await deps.readSql<{ caught: boolean | null }[]>`
      SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::float8 >= ${Number(mark)}::float8 AS caught`;
    return caught ? 'replica' : 'written';
  } catch {
    restReplica(deps.readSql);
    return 'resting';
  }
}

/**
 * Runs a read-only request's `read` under the rule above. `retryable` says whether a failed or
 * missed run may still be run again (not once a response has started).
 */
export async function readOnly<T>(
  deps: Deps,
  appId: string,
  read: (deps: Deps) => Promise<T>,
  options: { missed?: (result: T) => boolean; retryable?: () => boolean } = {},
): Promise<T> {
  if (!replicated(deps)) return read(deps);
  const servedBy = await chooseReader(deps, appId);
  const primary = readingFrom(deps, deps.sql);
  if (servedBy !== 'replica') {
    deps.metrics.replicaReads.inc({ served_by: servedBy });
    return read(primary);
  }
  const retryable = options.retryable ?? (() => true);
  let result: T;
  try {
    result = await read(readingFrom(deps, deps.readSql));
  } catch (err) {
    const verdict = replicaFault(err);
    if (!verdict || !retryable()) throw err;
    if (verdict === 'failed') restReplica(deps.readSql);
    deps.metrics.replicaReads.inc({ served_by: 'fallback' });
    return read(primary);
  }
  if (options.missed?.(result) && retryable()) {
    deps.metrics.replicaReads.inc({ served_by: 'fallback' });
    return read(primary);
  }
  deps.metrics.replicaReads.inc({ served_by: 'replica' });
  return result;
}

/**
 * What an error thrown by a read on the replica says about it: `missed` a row (NOT_FOUND),
 * `failed` (anything but the request's own error: unreachable, cancelled by replay), or
 * nothing (the request's own error, which the primary would answer the same).
 */
export function replicaFault(err: unknown): 'missed' | 'failed' | undefined {
  if (!(err instanceof AppError) || err.code === 'UNAVAILABLE') return 'failed';
  return err.code === 'NOT_FOUND' ? 'missed' : undefined;
}

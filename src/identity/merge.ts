import { transaction, type Sql, type Tx } from '../db.js';
import type { Deps } from '../deps.js';
import { fail, ok, type Result } from '../errors.js';
import { derivedId } from '../ids.js';
import { systemEvent, systemEventType } from '../ledger/event-types.js';
import { enqueue, type LedgerEvent } from '../queues.js';
import { getUser, isUuid, userMerged, userNotFound, type UserView } from './users.js';

/** What one merge did: recorded in user_merges and in the `user.merged` event. */
export interface MergeRecord {
  appId: string;
  targetUserId: string;
  sourceUserId: string;
  /** The source's platform users, now the target's. */
  platformUserIds: string[];
  eventId: string;
  linkCodeId: string | null;
  /** True when this merge had already happened (a repeated request or a retried job). */
  replayed: boolean;
}

/** Postgres errors after which the whole transaction may simply run again. */
const RETRYABLE = new Set(['40001', '40P01']);

/** Runs `fn` in a transaction, again on a serialization failure or deadlock (a few times). */
export async function inRetriedTransaction<T>(sql: Sql, fn: (tx: Tx) => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await transaction(sql, fn);
    } catch (err) {
      if (attempt >= 4 || !RETRYABLE.has((err as { code?: string }).code ?? '')) throw err;
    }
  }
}

/** The user.merged event id: a source is merged at most once, so the id follows from it. */
const mergeEventId = (appId: string, sourceUserId: string) => derivedId(appId, systemEventType('user.merged'), sourceUserId);

interface LockedUser {
  id: string;
  merged_into: string | null;
  is_system: boolean;
}

/**
 * Locks users in id order, so any two merges (or link activations) touching the same users
 * queue behind each other instead of deadlocking. FOR UPDATE returns the latest committed
 * version of each row, so what a merge checks after locking is what it acts on.
 */
export async function lockUsers(tx: Tx, appId: string, ids: string[]): Promise<Map<string, LockedUser>> {
  const rows = await tx<LockedUser[]>`
    SELECT id, merged_into, is_system FROM users
     WHERE app_id = ${appId} AND id = ANY(${[...new Set(ids)]}::uuid[])
     ORDER BY id
       FOR UPDATE`;
  return new Map(rows.map((r) => [r.id, r]));
}

/**
 * Merges `source` into `target` inside the caller's transaction: the source's platform users
 * move to the target, the target takes the source's name (if it has none) and metadata keys
 * it lacks, and the source becomes a tombstone pointing at the target.
 *
 * Safe under concurrent merges: both users are locked (in id order) before anything is
 * checked, and a user already merged away is never merged again, so two merges of the same
 * pair in opposite directions cannot both succeed (no cycle), and a platform user is moved
 * only from a live user to a live user (none lost). Merging what is already merged into this
 * very target answers the recorded merge (`replayed`).
 */
export async function mergeInTransaction(
  tx: Tx,
  appId: string,
  p: { targetUserId: string; sourceUserId: string; linkCodeId?: string | null },
): Promise<Result<MergeRecord>> {
  const { targetUserId: target, sourceUserId: source } = p;
  if (!isUuid(target)) return { ok: false, error: userNotFound(target) };
  if (!isUuid(source)) return { ok: false, error: userNotFound(source, ['source_user_id']) };
  if (target === source)
    return fail('VALIDATION_ERROR', 'A user cannot be merged into itself', [{ path: ['source_user_id'], message: 'same as the target' }]);

  const locked = await lockUsers(tx, appId, [target, source]);
  const t = locked.get(target);
  const s = locked.get(source);
  if (!t) return { ok: false, error: userNotFound(target) };
  if (!s) return { ok: false, error: userNotFound(source, ['source_user_id']) };
  if (s.merged_into) {
    const [done] = await tx<{ target_user_id: string; platform_user_ids: string[]; event_id: string; link_code_id: string | null }[]>`
      SELECT target_user_id, platform_user_ids, event_id, link_code_id FROM user_merges WHERE app_id = ${appId} AND source_user_id = ${source}`;
    if (done && done.target_user_id === target) {
      return ok({
        appId,
        targetUserId: target,
        sourceUserId: source,
        platformUserIds: done.platform_user_ids,
        eventId: done.event_id,
        linkCodeId: done.link_code_id,
        replayed: true,
      });
    }
    const [r] = await tx<{ id: string | null }[]>`SELECT resolve_user_id(${appId}, ${source}) AS id`;
    const f = userMerged(source, r?.id ?? null);
    return { ok: false, error: { ...f, details: [{ ...f.details![0], path: ['source_user_id'] }] } };
  }
  if (t.merged_into) {
    const [r] = await tx<{ id: string | null }[]>`SELECT resolve_user_id(${appId}, ${target}) AS id`;
    return { ok: false, error: userMerged(target, r?.id ?? null) };
  }
  if (t.is_system || s.is_system) {
    return fail('CONFLICT', 'Users standing for a connected account (bot, page, number) cannot be merged', [
      { path: [t.is_system ? 'id' : 'source_user_id'], message: 'system user' },
    ]);
  }

  const moved = await tx<{ id: string }[]>`
    UPDATE platform_users SET user_id = ${target} WHERE app_id = ${appId} AND user_id = ${source} RETURNING id`;
  await tx`
    UPDATE users t SET
      name = COALESCE(t.name, s.name),
      -- The target's keys win; the source's fill in only while the result stays within the size limit.
      metadata = CASE WHEN octet_length((s.metadata || t.metadata)::text) <= 65536 THEN s.metadata || t.metadata ELSE t.metadata END,
      updated_at = now()
      FROM users s
     WHERE t.app_id = ${appId} AND t.id = ${target} AND s.app_id = ${appId} AND s.id = ${source}`;
  await tx`UPDATE users SET merged_into = ${target}, merged_at = now(), updated_at = now() WHERE app_id = ${appId} AND id = ${source}`;
  const eventId = mergeEventId(appId, source);
  const platformUserIds = moved.map((r) => r.id).sort();
  await tx`
    INSERT INTO user_merges (source_user_id, app_id, target_user_id, platform_user_ids, event_id, link_code_id)
    VALUES (${source}, ${appId}, ${target}, ${platformUserIds}::uuid[], ${eventId}, ${p.linkCodeId ?? null})`;
  return ok({
    appId,
    targetUserId: target,
    sourceUserId: source,
    platformUserIds,
    eventId,
    linkCodeId: p.linkCodeId ?? null,
    replayed: false,
  });
}

/** Most platform users a user.merged event links as edges; the payload always lists them all. */
const MAX_EDGES = 100;

/** The `user.merged` event of a merge under its deterministic id. */
export function mergedEvent(m: MergeRecord): LedgerEvent {
  return {
    id: m.eventId,
    app_id: m.appId,
    ...systemEvent('user.merged', {
      target_user_id: m.targetUserId,
      source_user_id: m.sourceUserId,
      platform_user_ids: m.platformUserIds,
      link_code_id: m.linkCodeId,
    }),
    edges: m.platformUserIds
      .slice(0, MAX_EDGES)
      .map((id) => ({ edge_type: 'merged_platform_user', target_node_type: 'platform_user' as const, target_node_id: id })),
    attachments: [],
  };
}

/**
 * Merges two users of an application (POST /v1/users/:id/merge) and records `user.merged`.
 * The surviving user is read inside the merge's transaction: a merge that happened always
 * answers with its result, even if the survivor is itself merged away a moment later.
 * The event is enqueued after the commit under an id derived from the source, so a repeated
 * request — say after the enqueue failed — re-drives the same event and never records two.
 */
export async function mergeUsers(
  deps: Deps,
  appId: string,
  p: { targetUserId: string; sourceUserId: string },
): Promise<Result<MergeRecord & { user: UserView }>> {
  const result = await inRetriedTransaction(deps.sql, async (tx): Promise<Result<MergeRecord & { user: UserView }>> => {
    const merged = await mergeInTransaction(tx, appId, p);
    if (!merged.ok) return merged;
    const user = await getUser(tx as unknown as Sql, appId, merged.value.targetUserId);
    return user.ok ? ok({ ...merged.value, user: user.value }) : user;
  });
  if (result.ok) await enqueue(deps.queues, 'ledger', { event: mergedEvent(result.value) });
  return result;
}

import { createHash, randomUUID } from 'node:crypto';
import type { Sql } from './db.js';
import { fail, ok, type Result } from './errors.js';
import { deleteInBatches } from './retention/batched-delete.js';

/** Stable JSON (sorted keys) so the same body hashes the same whatever its key order. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * Claims an Idempotency-Key for a request (24 h). The first request gets a fresh resource id;
 * a repeat with the same body gets the same id back (`replay: true`), so it re-drives the
 * same idempotent job and answers with the same resource; another body → IDEMPOTENCY_CONFLICT.
 */
export async function claimIdempotencyKey(
  sql: Sql,
  appId: string,
  scope: 'events' | 'messages',
  key: string | undefined,
  body: unknown,
): Promise<Result<{ resourceId: string; replay: boolean }>> {
  const fresh = randomUUID();
  if (key === undefined) return ok({ resourceId: fresh, replay: false });
  if (key.length === 0 || key.length > 255)
    return fail('VALIDATION_ERROR', 'Idempotency-Key must be 1 to 255 characters', [
      { path: ['headers', 'Idempotency-Key'], message: 'invalid length' },
    ]);
  const hash = createHash('sha256').update(canonicalJson(body)).digest();
  const [claimed] = await sql<{ resource_id: string }[]>`
    INSERT INTO idempotency_keys (app_id, scope, key, request_hash, resource_id)
    VALUES (${appId}, ${scope}, ${key}, ${hash}, ${fresh})
    ON CONFLICT (app_id, scope, key) DO UPDATE
      SET request_hash = EXCLUDED.request_hash, resource_id = EXCLUDED.resource_id, created_at = now()
      WHERE idempotency_keys.created_at < now() - interval '24 hours'
    RETURNING resource_id`;
  if (claimed) return ok({ resourceId: claimed.resource_id, replay: false });
  const [existing] = await sql<{ resource_id: string; request_hash: Buffer }[]>`
    SELECT resource_id, request_hash FROM idempotency_keys WHERE app_id = ${appId} AND scope = ${scope} AND key = ${key}`;
  if (!existing) return claimIdempotencyKey(sql, appId, scope, key, body);
  if (!existing.request_hash.equals(hash)) {
    return fail('IDEMPOTENCY_CONFLICT', 'This Idempotency-Key was already used with a different request body');
  }
  return ok({ resourceId: existing.resource_id, replay: true });
}

/**
 * Drops keys older than `hours` (IDEMPOTENCY_KEY_RETENTION_HOURS, at least the 24 h a key
 * answers replays), in bounded chunks; the maintenance queue runs it on a schedule.
 */
export async function pruneIdempotencyKeys(sql: Sql, hours: number): Promise<number> {
  return deleteInBatches(
    async (limit) =>
      (
        await sql`
    DELETE FROM idempotency_keys WHERE (app_id, scope, key) IN (
      SELECT app_id, scope, key FROM idempotency_keys WHERE created_at < now() - ${Math.max(24, hours)} * interval '1 hour' LIMIT ${limit})`
      ).count,
  );
}

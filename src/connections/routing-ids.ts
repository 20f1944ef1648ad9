import type { Sql } from '../db.js';
import { fail, type Failure } from '../errors.js';
import { getAdapter } from '../platforms/registry.js';
import type { PlatformName } from '../platforms/types.js';

/**
 * The routing ids of a validated config: the accounts this connection owns (the adapter's
 * `routingFields`). Each belongs to at most one connection across every application
 * (migration 1700000000052): otherwise a second application could connect someone else's
 * number or page and receive copies of its inbound traffic.
 */
export function routingIdsOf(platform: PlatformName, config: Record<string, unknown>): string[] {
  const adapter = getAdapter(platform);
  const ids = adapter.routingFields
    .map((k) => config[k])
    .filter((v): v is string => typeof v === 'string' && v.length > 0)
    .map((v) => adapter.canonicalRoutingId?.(v) ?? v);
  return [...new Set(ids)];
}

const CONFLICT_CONSTRAINT = 'connection_routing_ids_pkey';

/**
 * Records that `connectionId` owns `ids` (replacing its earlier claims), inside the caller's
 * transaction. A taken id raises the primary key's unique violation, which aborts the
 * transaction: see `routingConflict`.
 */
export async function claimRoutingIds(
  tx: Sql,
  conn: { appId: string; connectionId: string },
  platform: PlatformName,
  ids: string[],
): Promise<void> {
  await releaseRoutingIds(tx, conn);
  if (ids.length === 0) return;
  await tx`
    INSERT INTO connection_routing_ids (platform, routing_id, connection_id, app_id)
    SELECT ${platform}, id, ${conn.connectionId}::uuid, ${conn.appId}::uuid FROM unnest(${ids}::text[]) AS id`;
}

/**
 * Drops a connection's claims. Called where the connection goes too: the claims are a
 * reference table (docs/SCALING.md, Citus), which cannot cascade from a sharded one.
 */
export async function releaseRoutingIds(tx: Sql, conn: { appId: string; connectionId: string }): Promise<void> {
  await tx`DELETE FROM connection_routing_ids WHERE app_id = ${conn.appId} AND connection_id = ${conn.connectionId}`;
}

/**
 * The 409 for a claim that lost, or undefined when `err` is another fault. The message names
 * the account but never the connection or application that owns it.
 */
export function routingConflict(err: unknown, platform: PlatformName): { ok: false; error: Failure } | undefined {
  const e = err as { code?: string; constraint_name?: string };
  if (e?.code !== '23505' || e.constraint_name !== CONFLICT_CONSTRAINT) return undefined;
  const fields = getAdapter(platform).routingFields.join(' / ');
  return fail(
    'PLATFORM_CONNECTION_CONFLICT',
    `This ${platform} account (${fields}) is already connected by another platform connection; delete that connection first`,
  );
}

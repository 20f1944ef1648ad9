import type { Sql } from '../db.js';
import { CREATED_AT_ISO } from '../ledger/write.js';

/** What a delivery body needs of an event. */
export interface BodyEvent {
  id: string;
  app_id: string;
  seq: number;
  event_type: string;
  payload: Record<string, unknown>;
  created_at: string;
  platform_connection_id: string | null;
  edges: Record<string, EdgeValue | EdgeValue[]>;
}

type EdgeValue = { platform_user_id: string; external_id: string | null; name?: string; is_system_user?: true } | { file_id: string };

/**
 * Loads events for delivery bodies, edges keyed by relation (SPEC 2.2 webhook form). Each
 * (app, event) pair is matched exactly, so an id can never pull another application's row.
 */
export async function loadBodyEvents(sql: Sql, refs: { app_id: string; id: string }[]): Promise<Map<string, BodyEvent>> {
  const out = new Map<string, BodyEvent>();
  if (refs.length === 0) return out;
  const apps = refs.map((r) => r.app_id);
  const ids = refs.map((r) => r.id);
  const rows = await sql<Omit<BodyEvent, 'edges'>[]>`
    SELECT e.id, e.app_id, e.seq, e.event_type, e.payload, ${sql.unsafe(CREATED_AT_ISO.replace('created_at', 'e.created_at'))} AS created_at,
           e.platform_connection_id
      FROM unnest(${apps}::uuid[], ${ids}::uuid[]) AS r(app_id, id)
      JOIN events e ON e.app_id = r.app_id AND e.id = r.id`;
  for (const r of rows) out.set(r.id, { ...r, edges: {} });
  if (rows.length === 0) return out;
  const edges = await sql<{ event_id: string; edge_type: string; target_node_type: string; target_node_id: string; external_id: string | null; name: string | null; is_system_user: boolean | null }[]>`
    SELECT x.event_id, x.edge_type, x.target_node_type, x.target_node_id, pu.external_id, pu.name, pu.is_system_user
      FROM event_edges x
      LEFT JOIN platform_users pu ON x.target_node_type = 'platform_user' AND pu.id = x.target_node_id AND pu.app_id = x.app_id
     WHERE x.event_id = ANY(${rows.map((r) => r.id)}::uuid[]) AND x.app_id = ANY(${[...new Set(apps)]}::uuid[])
     ORDER BY x.event_id, x.ord`;
  for (const x of edges) {
    const event = out.get(x.event_id);
    if (!event) continue;
    const value: EdgeValue =
      x.target_node_type === 'platform_user'
        ? { platform_user_id: x.target_node_id, external_id: x.external_id, ...(x.name ? { name: x.name } : {}), ...(x.is_system_user ? { is_system_user: true as const } : {}) }
        : { file_id: x.target_node_id };
    const prev = event.edges[x.edge_type];
    // One edge of a relation is an object; several (e.g. attachments) become an array.
    event.edges[x.edge_type] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  return out;
}

/**
 * The delivery body of SPEC 6.3 as the exact text that is signed, stored and re-sent: built
 * once, so every retry and replay carries identical bytes.
 */
export function buildDeliveryBody(input: { deliveryId: string; subscriptionId: string; event: Omit<BodyEvent, 'seq'>; timestamp: Date }): string {
  const { event } = input;
  return JSON.stringify({
    id: input.deliveryId,
    subscription_id: input.subscriptionId,
    event_id: event.id,
    event_type: event.event_type,
    app_id: event.app_id,
    payload: event.payload,
    edges: event.edges,
    created_at: event.created_at,
    timestamp: input.timestamp.toISOString(),
    ...(event.platform_connection_id ? { platform_connection_id: event.platform_connection_id } : {}),
  });
}

import type { Sql } from '../db.js';
import { CREATED_AT_ISO } from '../ledger/write.js';

/** What a delivery body needs of an event. */
export interface BodyEvent {
  id: string;
  app_id: string;
  seq: number;
  event_type: string;
  /** Matched beside the type (subscriptions by an alias); never in the body, which names the stored type. */
  event_alias: string | null;
  /** Matched by subscriptions' channels and scopes; also sent in the body. */
  channels: string[];
  payload: Record<string, unknown>;
  created_at: string;
  platform_connection_id: string | null;
  edges: Record<string, EdgeValue | EdgeValue[]>;
}

type EdgeValue = { platform_user_id: string; external_id: string | null; name?: string; is_system_user?: true } | { file_id: string };

interface EdgeRow {
  edge_type: string;
  target_node_type: string;
  target_node_id: string;
  external_id: string | null;
  name: string | null;
  is_system_user: boolean | null;
}

/** Edges keyed by relation (the webhook form): one edge is an object, several an array. */
function keyEdges(rows: EdgeRow[]): BodyEvent['edges'] {
  const edges: BodyEvent['edges'] = {};
  for (const x of rows) {
    const value: EdgeValue =
      x.target_node_type === 'platform_user'
        ? {
            platform_user_id: x.target_node_id,
            external_id: x.external_id,
            ...(x.name ? { name: x.name } : {}),
            ...(x.is_system_user ? { is_system_user: true as const } : {}),
          }
        : { file_id: x.target_node_id };
    const prev = edges[x.edge_type];
    edges[x.edge_type] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  return edges;
}

/**
 * Loads events for delivery bodies in one query, with their edges and the subscriptions that
 * already have a delivery of each. Each (app, event) pair is matched exactly, so an id can
 * never pull another application's row.
 */
export async function loadBodyEvents(
  sql: Sql,
  refs: { app_id: string; id: string }[],
): Promise<Map<string, BodyEvent & { delivered_to: string[] }>> {
  const out = new Map<string, BodyEvent & { delivered_to: string[] }>();
  if (refs.length === 0) return out;
  const rows = await sql<(Omit<BodyEvent, 'edges'> & { edges: EdgeRow[]; delivered_to: string[] })[]>`
    SELECT e.id, e.app_id, e.seq, e.event_type, e.event_alias, e.channels, e.payload, ${sql.unsafe(CREATED_AT_ISO.replace('created_at', 'e.created_at'))} AS created_at,
           e.platform_connection_id,
           COALESCE((SELECT json_agg(json_build_object('edge_type', x.edge_type, 'target_node_type', x.target_node_type,
                                     'target_node_id', x.target_node_id, 'external_id', pu.external_id, 'name', pu.name,
                                     'is_system_user', pu.is_system_user) ORDER BY x.ord)
                       FROM event_edges x
                       LEFT JOIN platform_users pu ON x.target_node_type = 'platform_user' AND pu.id = x.target_node_id AND pu.app_id = x.app_id
                      WHERE x.event_id = e.id AND x.app_id = e.app_id), '[]') AS edges,
           ARRAY(SELECT d.subscription_id::text FROM webhook_deliveries d WHERE d.app_id = e.app_id AND d.event_id = e.id) AS delivered_to
      FROM unnest(${refs.map((r) => r.app_id)}::uuid[], ${refs.map((r) => r.id)}::uuid[]) AS r(app_id, id)
      JOIN events e ON e.app_id = r.app_id AND e.id = r.id
     WHERE e.id = ANY(${refs.map((r) => r.id)}::uuid[])`;
  for (const r of rows) out.set(r.id, { ...r, edges: keyEdges(r.edges) });
  return out;
}

/**
 * The delivery body (docs/webhook-receiver.md) as the exact text that is signed, stored and re-sent: built
 * once, so every retry and replay carries identical bytes.
 */
export function buildDeliveryBody(input: {
  deliveryId: string;
  subscriptionId: string;
  event: Omit<BodyEvent, 'seq' | 'event_alias'>;
  timestamp: Date;
}): string {
  return deliveryBodies(input.event, input.timestamp)(input.deliveryId, input.subscriptionId);
}

/**
 * The bodies of one event for several subscriptions: the event part is serialised once and
 * only the two leading ids differ (same text as serialising each body whole).
 */
export function deliveryBodies(
  event: Omit<BodyEvent, 'seq' | 'event_alias'>,
  timestamp: Date,
): (deliveryId: string, subscriptionId: string) => string {
  const rest = JSON.stringify({
    event_id: event.id,
    event_type: event.event_type,
    app_id: event.app_id,
    payload: event.payload,
    edges: event.edges,
    created_at: event.created_at,
    timestamp: timestamp.toISOString(),
    ...(event.platform_connection_id ? { platform_connection_id: event.platform_connection_id } : {}),
    ...(event.channels.length ? { channels: event.channels } : {}),
  }).slice(1);
  return (deliveryId, subscriptionId) => `{"id":${JSON.stringify(deliveryId)},"subscription_id":${JSON.stringify(subscriptionId)},${rest}`;
}

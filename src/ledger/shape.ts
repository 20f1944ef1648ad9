import type { EventRecord } from './read.js';

/** An event in REST names, as POST/GET /v1/events return it. */
export function toRestEvent(e: EventRecord) {
  return {
    id: e.id,
    app_id: e.app_id,
    event_type: e.event_type,
    channels: e.channels,
    payload: e.payload,
    edges: e.edges.map((x) => ({ edge_type: x.edge_type, target_node_type: x.target_node_type, target_node_id: x.target_node_id })),
    attachments: e.attachments,
    origin_event_id: e.origin_event_id,
    conversation_id: e.conversation_id,
    platform_connection_id: e.platform_connection_id,
    ...(e.validation_errors ? { validation_errors: e.validation_errors } : {}),
    created_at: e.created_at,
    cursor: e.cursor,
  };
}

/** An event in GraphQL names: the `events` node, also what the SSE stream sends. */
export function toEventNode(e: EventRecord) {
  return {
    id: e.id,
    appId: e.app_id,
    eventType: e.event_type,
    channels: e.channels,
    payload: e.payload,
    edges: e.edges.map((x) => ({
      edgeType: x.edge_type,
      targetNodeType: x.target_node_type.toUpperCase(),
      targetNodeId: x.target_node_id,
      targetPlatformUser: x.platform_user
        ? { id: x.platform_user.id, externalId: x.platform_user.external_id, name: x.platform_user.name }
        : null,
    })),
    attachments: e.attachments,
    createdAt: e.created_at,
    originEventId: e.origin_event_id,
    conversationId: e.conversation_id,
    platformConnectionId: e.platform_connection_id,
    validationErrors: e.validation_errors,
    cursor: e.cursor,
  };
}
export type EventNode = ReturnType<typeof toEventNode>;

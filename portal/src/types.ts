/** The public API's shapes as the portal reads them (GET /v1/openapi.json). */

export type Area = 'all' | 'webhooks';

export interface Session {
  application_id: string;
  application_name: string;
  areas: Area[];
  theme: { accent_color?: string; logo_url?: string };
  return_url: string | null;
  csrf_token: string;
  expires_at: string;
}

export interface RestEdge {
  edge_type: string;
  target_node_type: 'platform_user' | 'file';
  target_node_id: string;
}

export interface RestEvent {
  id: string;
  event_type: string;
  payload: Record<string, unknown>;
  edges: RestEdge[];
  attachments: unknown[];
  origin_event_id: string | null;
  conversation_id: string | null;
  platform_connection_id: string | null;
  validation_errors?: unknown[];
  created_at: string;
  cursor: string;
}

/** An event as the SSE stream (and GraphQL) sends it. */
export interface StreamEvent {
  id: string;
  eventType: string;
  payload: Record<string, unknown>;
  edges: {
    edgeType: string;
    targetNodeType: 'PLATFORM_USER' | 'FILE';
    targetNodeId: string;
    targetPlatformUser: { id: string; externalId: string; name: string | null } | null;
  }[];
  createdAt: string;
  originEventId: string | null;
  conversationId: string | null;
  platformConnectionId: string | null;
  cursor: string;
}

export interface Page<T> {
  data: T[];
  next_cursor?: string | null;
  has_more: boolean;
}

export type SubscriptionStatus = 'ACTIVE' | 'PAUSED' | 'DISABLED';

export interface Subscription {
  id: string;
  name: string;
  target_url: string;
  event_patterns: string[];
  status: SubscriptionStatus;
  max_per_second: number | null;
  consecutive_failures: number;
  previous_secret_expires_at: string | null;
  disabled_at: string | null;
  created_at: string;
  updated_at: string;
  secret?: string;
}

export type DeliveryStatus = 'pending' | 'retrying' | 'delivered' | 'failed';

/** One attempt in a subscription's delivery log. */
export interface DeliveryAttempt {
  id: string;
  delivery_id: string | null;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  status_code: number | null;
  attempt_count: number;
  duration: number;
  error_message: string | null;
  request_body: string;
  /** As sent, signature included; null on attempts logged before headers were kept. */
  request_headers: Record<string, string> | null;
  response_body: string | null;
  response_headers: Record<string, string | string[]> | null;
  /** When the next attempt is due, while the delivery is retrying. */
  next_retry_at: string | null;
  created_at: string;
  cursor: string;
}

export interface Connection {
  id: string;
  name: string;
  platform_name: string;
  config: Record<string, unknown>;
  webhook_url: string;
  status: 'ACTIVE' | 'DISABLED';
  health: {
    status: 'green' | 'red' | 'unknown';
    last_success_at: string | null;
    last_error_at: string | null;
    last_error: string | null;
    last_inbound_at: string | null;
    consecutive_failures: number;
  };
  created_at: string;
}

export interface PlatformUser {
  id: string;
  user_id: string;
  platform: string;
  external_id: string;
  name: string | null;
  platform_connection_id: string | null;
  is_system_user: boolean;
}

export interface User {
  id: string;
  name: string | null;
  metadata: Record<string, unknown>;
  is_system: boolean;
  created_at: string;
  platform_users: PlatformUser[];
}

export interface Conversation {
  id: string;
  [field: string]: unknown;
}

export interface UserDetail extends User {
  conversations: Conversation[];
  conversations_next_cursor: string | null;
}

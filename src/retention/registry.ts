import type { Config } from '../config.js';
import type { MaintenanceTask } from '../queues.js';

/**
 * How long a table's rows live. Every table the migrations create is named here
 * (test/retention/registry.test.ts fails otherwise), so a table that grows per request cannot
 * be added without deciding who prunes it.
 */
export type Retention =
  /** Rows past `variable` are deleted in bounded chunks by a scheduled job. */
  | { kind: 'pruned'; variable: keyof Config; by: Pruner }
  /** Whole time ranges are dropped as partitions by a scheduled job. */
  | { kind: 'partitioned'; variable: keyof Config; by: Pruner }
  /** Nothing deletes rows on a schedule; `because` says why the table stays bounded or must keep them. */
  | { kind: 'kept'; because: string };

/** The scheduled job that applies a retention: a task of the maintenance queue. */
export type Pruner = { queue: 'maintenance'; task: MaintenanceTask };

/** A delivery and its attempts go together, by one task. */
const WEBHOOK_LOGS = {
  kind: 'pruned',
  variable: 'WEBHOOK_LOG_RETENTION_DAYS',
  by: { queue: 'maintenance', task: 'prune-webhook-logs' },
} as const satisfies Retention;

const ENTITY = 'a record the API manages (created, read and deleted on request), not a per-request trace';

export const RETENTION = {
  applications: { kind: 'kept', because: 'the tenants themselves, deleted by an operator' },
  api_keys: { kind: 'kept', because: 'one row per key an administrator creates; a revoked key stays to answer 401 and for audit' },
  users: { kind: 'kept', because: ENTITY },
  platform_users: { kind: 'kept', because: 'one row per person seen on a platform, not per message' },
  user_merges: {
    kind: 'kept',
    because: 'one row per merge: it makes a repeated merge answer the same, and tombstoned users resolve through it',
  },
  conversations: { kind: 'kept', because: 'one row per conversation, not per message' },
  conversation_participants: { kind: 'kept', because: 'one row per (conversation, participant)' },
  platform_connections: { kind: 'kept', because: ENTITY },
  connection_routing_ids: { kind: 'kept', because: 'a few rows per connection' },
  shared_webhooks: { kind: 'kept', because: 'one row per Meta-family platform' },
  recipient_counters: {
    kind: 'kept',
    because: 'one row per recipient of a connection; resetting one while messages to it exist would reorder them',
  },
  webhook_subscriptions: { kind: 'kept', because: ENTITY },
  event_schemas: { kind: 'kept', because: ENTITY },
  change_stamps: { kind: 'kept', because: 'one row per cached record kind' },
  ledger_heads: { kind: 'kept', because: 'one row per application' },
  idempotency_keys: {
    kind: 'pruned',
    variable: 'IDEMPOTENCY_KEY_RETENTION_HOURS',
    by: { queue: 'maintenance', task: 'prune-idempotency-keys' },
  },
  link_codes: { kind: 'pruned', variable: 'LINK_CODE_RETENTION_DAYS', by: { queue: 'maintenance', task: 'prune-link-codes' } },
  files: { kind: 'pruned', variable: 'FILE_RETENTION_DAYS', by: { queue: 'maintenance', task: 'prune-files' } },
  portal_sessions: {
    kind: 'pruned',
    variable: 'PORTAL_SESSION_RETENTION_DAYS',
    by: { queue: 'maintenance', task: 'prune-portal-sessions' },
  },
  outbound_messages: { kind: 'pruned', variable: 'MESSAGE_RETENTION_DAYS', by: { queue: 'maintenance', task: 'prune-messages' } },
  webhook_delivery_logs: WEBHOOK_LOGS,
  webhook_deliveries: WEBHOOK_LOGS,
  events: { kind: 'partitioned', variable: 'EVENT_RETENTION_DAYS', by: { queue: 'maintenance', task: 'event-partitions' } },
  event_edges: { kind: 'partitioned', variable: 'EVENT_RETENTION_DAYS', by: { queue: 'maintenance', task: 'event-partitions' } },
} satisfies Record<string, Retention>;

-- Up Migration
-- Every per-application table is keyed by its application (docs/SCALING.md, "Distributing
-- PostgreSQL with Citus"): each primary and unique key includes app_id, and each foreign key
-- between two such tables is (app_id, x) → (app_id, id). That is what a distributed PostgreSQL
-- needs to keep a table sharded by app_id with its colocated tables: a unique key can only be
-- enforced inside one shard, and a foreign key only between rows of the same shard. On one
-- server it changes nothing an application can see: ids are random uuids, unique anyway.
-- test/foundation/distribution-keys.test.ts reads the catalog and holds every table to it.
--
-- The tables without a per-application key stay whole on every node (reference tables:
-- applications, api_keys, portal_sessions, connection_routing_ids, shared_webhooks,
-- change_stamps), because they are looked up by a secret's hash or a platform routing id
-- before the application is known. A reference table cannot reference a sharded one, so
-- connection_routing_ids now names its application (for the cascade when the application
-- goes) and its claims are deleted with their connection by the application code
-- (deleteConnection in src/connections/connections.ts).
--
-- Locks and time: this runs in one transaction. Each primary key is rebuilt under an ACCESS
-- EXCLUSIVE lock on its table (and every partition of events and event_edges), and each
-- foreign key is checked by one scan of the referencing table; nothing reads or writes those
-- tables meanwhile. docs/OPERATIONS.md gives the measured cost per million rows: on a large
-- deployment run it in a maintenance window (stop the web and worker processes first).
-- CREATE UNIQUE INDEX CONCURRENTLY could shorten the lock on the plain tables, but it cannot
-- run in a transaction nor on a partitioned table (events, event_edges: the largest), so it
-- would buy little for a migration that could then stop half done.

-- Foreign keys go first: they depend on the keys being rebuilt.
ALTER TABLE conversations DROP CONSTRAINT conversations_platform_connection_id_fkey;
ALTER TABLE outbound_messages DROP CONSTRAINT outbound_messages_platform_connection_id_fkey;
ALTER TABLE recipient_counters DROP CONSTRAINT recipient_counters_platform_connection_id_fkey;
ALTER TABLE connection_routing_ids DROP CONSTRAINT connection_routing_ids_connection_id_fkey;
ALTER TABLE platform_users DROP CONSTRAINT platform_users_user_id_fkey;
ALTER TABLE users DROP CONSTRAINT users_merged_into_fkey;
ALTER TABLE link_codes DROP CONSTRAINT link_codes_user_id_fkey;
ALTER TABLE link_codes DROP CONSTRAINT link_codes_used_by_platform_user_id_fkey;
ALTER TABLE user_merges DROP CONSTRAINT user_merges_source_user_id_fkey;
ALTER TABLE user_merges DROP CONSTRAINT user_merges_target_user_id_fkey;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_subscription_id_fkey;
ALTER TABLE webhook_delivery_logs DROP CONSTRAINT webhook_delivery_logs_subscription_id_fkey;
ALTER TABLE webhook_delivery_logs DROP CONSTRAINT webhook_delivery_logs_delivery_id_fkey;

-- The two per-application tables that did not name their application.
ALTER TABLE recipient_counters ADD COLUMN app_id uuid;
UPDATE recipient_counters r SET app_id = c.app_id FROM platform_connections c WHERE c.id = r.platform_connection_id;
-- A counter whose connection is gone (none are expected: they cascaded) counts for nothing.
DELETE FROM recipient_counters WHERE app_id IS NULL;
ALTER TABLE recipient_counters ALTER COLUMN app_id SET NOT NULL,
  ADD CONSTRAINT recipient_counters_app_id_fkey FOREIGN KEY (app_id) REFERENCES applications(id) ON DELETE CASCADE;

ALTER TABLE connection_routing_ids ADD COLUMN app_id uuid;
UPDATE connection_routing_ids r SET app_id = c.app_id FROM platform_connections c WHERE c.id = r.connection_id;
DELETE FROM connection_routing_ids WHERE app_id IS NULL;
ALTER TABLE connection_routing_ids ALTER COLUMN app_id SET NOT NULL,
  ADD CONSTRAINT connection_routing_ids_app_id_fkey FOREIGN KEY (app_id) REFERENCES applications(id) ON DELETE CASCADE;

-- Primary and unique keys. The application follows the columns that led them: a statement
-- that finds a row by its id alone (the inbound receiver's connection, by the id in its URL)
-- still probes the key, and one by (app_id, id) probes it as before.
ALTER TABLE users DROP CONSTRAINT users_pkey, ADD CONSTRAINT users_pkey PRIMARY KEY (id, app_id);
ALTER TABLE platform_users DROP CONSTRAINT platform_users_pkey, ADD CONSTRAINT platform_users_pkey PRIMARY KEY (id, app_id);
ALTER TABLE files DROP CONSTRAINT files_pkey, ADD CONSTRAINT files_pkey PRIMARY KEY (id, app_id);
ALTER TABLE event_schemas DROP CONSTRAINT event_schemas_pkey, ADD CONSTRAINT event_schemas_pkey PRIMARY KEY (id, app_id);
ALTER TABLE platform_connections DROP CONSTRAINT platform_connections_pkey,
  ADD CONSTRAINT platform_connections_pkey PRIMARY KEY (id, app_id);
ALTER TABLE conversations DROP CONSTRAINT conversations_pkey, ADD CONSTRAINT conversations_pkey PRIMARY KEY (id, app_id),
  DROP CONSTRAINT conversations_platform_connection_id_external_id_thread_id_key,
  ADD CONSTRAINT conversations_identity UNIQUE (platform_connection_id, external_id, thread_id, app_id);
ALTER TABLE conversation_participants DROP CONSTRAINT conversation_participants_pkey,
  ADD CONSTRAINT conversation_participants_pkey PRIMARY KEY (conversation_id, platform_user_id, app_id);
ALTER TABLE outbound_messages DROP CONSTRAINT outbound_messages_pkey, ADD CONSTRAINT outbound_messages_pkey PRIMARY KEY (id, app_id);
ALTER TABLE recipient_counters DROP CONSTRAINT recipient_counters_pkey,
  ADD CONSTRAINT recipient_counters_pkey PRIMARY KEY (platform_connection_id, to_external_id, app_id);
ALTER TABLE link_codes DROP CONSTRAINT link_codes_pkey, ADD CONSTRAINT link_codes_pkey PRIMARY KEY (id, app_id);
ALTER TABLE user_merges DROP CONSTRAINT user_merges_pkey, ADD CONSTRAINT user_merges_pkey PRIMARY KEY (source_user_id, app_id);
ALTER TABLE webhook_subscriptions DROP CONSTRAINT webhook_subscriptions_pkey,
  ADD CONSTRAINT webhook_subscriptions_pkey PRIMARY KEY (id, app_id);
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_pkey, ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id, app_id),
  DROP CONSTRAINT webhook_deliveries_subscription_id_event_id_key,
  ADD CONSTRAINT webhook_deliveries_once UNIQUE (subscription_id, event_id, app_id);
ALTER TABLE webhook_delivery_logs DROP CONSTRAINT webhook_delivery_logs_pkey, ADD CONSTRAINT webhook_delivery_logs_pkey PRIMARY KEY (n, app_id),
  DROP CONSTRAINT webhook_delivery_logs_id_key, ADD CONSTRAINT webhook_delivery_logs_id_key UNIQUE (id, app_id);
-- The partitioned ledger: its keys already hold the partition key (created_at), and now the
-- application too. Rebuilt on every partition; src/ledger/partitions.ts's new months inherit it.
ALTER TABLE events DROP CONSTRAINT events_pkey, ADD CONSTRAINT events_pkey PRIMARY KEY (id, app_id, created_at);
ALTER TABLE event_edges DROP CONSTRAINT event_edges_pkey,
  ADD CONSTRAINT event_edges_pkey PRIMARY KEY (event_id, ord, app_id, event_created_at);

-- Foreign keys, each within one application.
ALTER TABLE users ADD CONSTRAINT users_merged_into_fkey FOREIGN KEY (app_id, merged_into) REFERENCES users (app_id, id);
ALTER TABLE platform_users ADD CONSTRAINT platform_users_user_id_fkey FOREIGN KEY (app_id, user_id) REFERENCES users (app_id, id);
ALTER TABLE conversations ADD CONSTRAINT conversations_platform_connection_id_fkey
  FOREIGN KEY (app_id, platform_connection_id) REFERENCES platform_connections (app_id, id) ON DELETE CASCADE;
ALTER TABLE outbound_messages ADD CONSTRAINT outbound_messages_platform_connection_id_fkey
  FOREIGN KEY (app_id, platform_connection_id) REFERENCES platform_connections (app_id, id) ON DELETE CASCADE;
ALTER TABLE recipient_counters ADD CONSTRAINT recipient_counters_platform_connection_id_fkey
  FOREIGN KEY (app_id, platform_connection_id) REFERENCES platform_connections (app_id, id) ON DELETE CASCADE;
ALTER TABLE link_codes ADD CONSTRAINT link_codes_user_id_fkey
  FOREIGN KEY (app_id, user_id) REFERENCES users (app_id, id) ON DELETE CASCADE;
-- Only the platform user's column is cleared when it goes: app_id stays (PostgreSQL 15).
ALTER TABLE link_codes ADD CONSTRAINT link_codes_used_by_platform_user_id_fkey
  FOREIGN KEY (app_id, used_by_platform_user_id) REFERENCES platform_users (app_id, id) ON DELETE SET NULL (used_by_platform_user_id);
ALTER TABLE user_merges ADD CONSTRAINT user_merges_source_user_id_fkey
  FOREIGN KEY (app_id, source_user_id) REFERENCES users (app_id, id) ON DELETE CASCADE;
ALTER TABLE user_merges ADD CONSTRAINT user_merges_target_user_id_fkey
  FOREIGN KEY (app_id, target_user_id) REFERENCES users (app_id, id) ON DELETE CASCADE;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_subscription_id_fkey
  FOREIGN KEY (app_id, subscription_id) REFERENCES webhook_subscriptions (app_id, id) ON DELETE CASCADE;
ALTER TABLE webhook_delivery_logs ADD CONSTRAINT webhook_delivery_logs_subscription_id_fkey
  FOREIGN KEY (app_id, subscription_id) REFERENCES webhook_subscriptions (app_id, id) ON DELETE CASCADE;
ALTER TABLE webhook_delivery_logs ADD CONSTRAINT webhook_delivery_logs_delivery_id_fkey
  FOREIGN KEY (app_id, delivery_id) REFERENCES webhook_deliveries (app_id, id) ON DELETE CASCADE;

-- Down Migration
ALTER TABLE webhook_delivery_logs DROP CONSTRAINT webhook_delivery_logs_delivery_id_fkey;
ALTER TABLE webhook_delivery_logs DROP CONSTRAINT webhook_delivery_logs_subscription_id_fkey;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_subscription_id_fkey;
ALTER TABLE user_merges DROP CONSTRAINT user_merges_target_user_id_fkey;
ALTER TABLE user_merges DROP CONSTRAINT user_merges_source_user_id_fkey;
ALTER TABLE link_codes DROP CONSTRAINT link_codes_used_by_platform_user_id_fkey;
ALTER TABLE link_codes DROP CONSTRAINT link_codes_user_id_fkey;
ALTER TABLE recipient_counters DROP CONSTRAINT recipient_counters_platform_connection_id_fkey;
ALTER TABLE outbound_messages DROP CONSTRAINT outbound_messages_platform_connection_id_fkey;
ALTER TABLE conversations DROP CONSTRAINT conversations_platform_connection_id_fkey;
ALTER TABLE platform_users DROP CONSTRAINT platform_users_user_id_fkey;
ALTER TABLE users DROP CONSTRAINT users_merged_into_fkey;

ALTER TABLE event_edges DROP CONSTRAINT event_edges_pkey, ADD CONSTRAINT event_edges_pkey PRIMARY KEY (event_id, ord, event_created_at);
ALTER TABLE events DROP CONSTRAINT events_pkey, ADD CONSTRAINT events_pkey PRIMARY KEY (id, created_at);
ALTER TABLE webhook_delivery_logs DROP CONSTRAINT webhook_delivery_logs_id_key, ADD CONSTRAINT webhook_delivery_logs_id_key UNIQUE (id),
  DROP CONSTRAINT webhook_delivery_logs_pkey, ADD CONSTRAINT webhook_delivery_logs_pkey PRIMARY KEY (n);
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_once,
  ADD CONSTRAINT webhook_deliveries_subscription_id_event_id_key UNIQUE (subscription_id, event_id),
  DROP CONSTRAINT webhook_deliveries_pkey, ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id);
ALTER TABLE webhook_subscriptions DROP CONSTRAINT webhook_subscriptions_pkey, ADD CONSTRAINT webhook_subscriptions_pkey PRIMARY KEY (id);
ALTER TABLE user_merges DROP CONSTRAINT user_merges_pkey, ADD CONSTRAINT user_merges_pkey PRIMARY KEY (source_user_id);
ALTER TABLE link_codes DROP CONSTRAINT link_codes_pkey, ADD CONSTRAINT link_codes_pkey PRIMARY KEY (id);
ALTER TABLE recipient_counters DROP CONSTRAINT recipient_counters_pkey,
  ADD CONSTRAINT recipient_counters_pkey PRIMARY KEY (platform_connection_id, to_external_id);
ALTER TABLE outbound_messages DROP CONSTRAINT outbound_messages_pkey, ADD CONSTRAINT outbound_messages_pkey PRIMARY KEY (id);
ALTER TABLE conversation_participants DROP CONSTRAINT conversation_participants_pkey,
  ADD CONSTRAINT conversation_participants_pkey PRIMARY KEY (conversation_id, platform_user_id);
ALTER TABLE conversations DROP CONSTRAINT conversations_identity,
  ADD CONSTRAINT conversations_platform_connection_id_external_id_thread_id_key UNIQUE (platform_connection_id, external_id, thread_id),
  DROP CONSTRAINT conversations_pkey, ADD CONSTRAINT conversations_pkey PRIMARY KEY (id);
ALTER TABLE platform_connections DROP CONSTRAINT platform_connections_pkey, ADD CONSTRAINT platform_connections_pkey PRIMARY KEY (id);
ALTER TABLE event_schemas DROP CONSTRAINT event_schemas_pkey, ADD CONSTRAINT event_schemas_pkey PRIMARY KEY (id);
ALTER TABLE files DROP CONSTRAINT files_pkey, ADD CONSTRAINT files_pkey PRIMARY KEY (id);
ALTER TABLE platform_users DROP CONSTRAINT platform_users_pkey, ADD CONSTRAINT platform_users_pkey PRIMARY KEY (id);
ALTER TABLE users DROP CONSTRAINT users_pkey, ADD CONSTRAINT users_pkey PRIMARY KEY (id);

ALTER TABLE connection_routing_ids DROP COLUMN app_id;
ALTER TABLE recipient_counters DROP COLUMN app_id;

ALTER TABLE users ADD CONSTRAINT users_merged_into_fkey FOREIGN KEY (merged_into) REFERENCES users (id);
ALTER TABLE platform_users ADD CONSTRAINT platform_users_user_id_fkey FOREIGN KEY (user_id) REFERENCES users (id);
ALTER TABLE conversations ADD CONSTRAINT conversations_platform_connection_id_fkey
  FOREIGN KEY (platform_connection_id) REFERENCES platform_connections (id) ON DELETE CASCADE;
ALTER TABLE outbound_messages ADD CONSTRAINT outbound_messages_platform_connection_id_fkey
  FOREIGN KEY (platform_connection_id) REFERENCES platform_connections (id) ON DELETE CASCADE;
ALTER TABLE recipient_counters ADD CONSTRAINT recipient_counters_platform_connection_id_fkey
  FOREIGN KEY (platform_connection_id) REFERENCES platform_connections (id) ON DELETE CASCADE;
ALTER TABLE connection_routing_ids ADD CONSTRAINT connection_routing_ids_connection_id_fkey
  FOREIGN KEY (connection_id) REFERENCES platform_connections (id) ON DELETE CASCADE;
ALTER TABLE link_codes ADD CONSTRAINT link_codes_user_id_fkey FOREIGN KEY (user_id) REFERENCES users (id) ON DELETE CASCADE;
ALTER TABLE link_codes ADD CONSTRAINT link_codes_used_by_platform_user_id_fkey
  FOREIGN KEY (used_by_platform_user_id) REFERENCES platform_users (id) ON DELETE SET NULL;
ALTER TABLE user_merges ADD CONSTRAINT user_merges_source_user_id_fkey FOREIGN KEY (source_user_id) REFERENCES users (id) ON DELETE CASCADE;
ALTER TABLE user_merges ADD CONSTRAINT user_merges_target_user_id_fkey FOREIGN KEY (target_user_id) REFERENCES users (id) ON DELETE CASCADE;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_subscription_id_fkey
  FOREIGN KEY (subscription_id) REFERENCES webhook_subscriptions (id) ON DELETE CASCADE;
ALTER TABLE webhook_delivery_logs ADD CONSTRAINT webhook_delivery_logs_subscription_id_fkey
  FOREIGN KEY (subscription_id) REFERENCES webhook_subscriptions (id) ON DELETE CASCADE;
ALTER TABLE webhook_delivery_logs ADD CONSTRAINT webhook_delivery_logs_delivery_id_fkey
  FOREIGN KEY (delivery_id) REFERENCES webhook_deliveries (id) ON DELETE CASCADE;

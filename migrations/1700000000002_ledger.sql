-- Up Migration

-- Identity and file records that events can point at. Later migrations add their columns.
CREATE TABLE users (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id      uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  name        text,
  metadata    jsonb NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX users_app_idx ON users (app_id, created_at, id);

CREATE TABLE platform_users (
  id                      uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id                  uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  user_id                 uuid REFERENCES users(id),
  platform                text NOT NULL,
  platform_connection_id  uuid,
  external_id             text NOT NULL,
  name                    text,
  is_system_user          boolean NOT NULL DEFAULT false,
  created_at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX platform_users_app_idx ON platform_users (app_id, id);
CREATE INDEX platform_users_user_idx ON platform_users (user_id);

CREATE TABLE files (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id      uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  filename    text,
  mime_type   text,
  size_bytes  bigint,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX files_app_idx ON files (app_id, id);

-- The ledger. `seq` is the per-application position; it is assigned under a per-application
-- row lock on ledger_heads, together with a strictly increasing created_at, so (created_at, id)
-- order and seq order are the same and commits become visible in seq order (see
-- src/ledger/write.ts for why that keeps the ledger invariant).
CREATE TABLE ledger_heads (
  app_id   uuid PRIMARY KEY REFERENCES applications(id) ON DELETE CASCADE,
  seq      bigint NOT NULL DEFAULT 0,
  last_at  timestamptz NOT NULL DEFAULT '-infinity'
);

CREATE TABLE events (
  id                      uuid PRIMARY KEY,
  app_id                  uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  seq                     bigint NOT NULL,
  created_at              timestamptz NOT NULL,
  event_type              text NOT NULL,
  payload                 jsonb NOT NULL,
  attachments             jsonb NOT NULL DEFAULT '[]',
  origin_event_id         uuid,
  conversation_id         uuid,
  platform_connection_id  uuid,
  validation_errors       jsonb,
  UNIQUE (app_id, seq)
);
CREATE INDEX events_type_idx ON events (app_id, event_type text_pattern_ops, seq);
CREATE INDEX events_conversation_idx ON events (app_id, conversation_id, seq) WHERE conversation_id IS NOT NULL;
CREATE INDEX events_created_idx ON events (app_id, created_at);
CREATE INDEX events_payload_idx ON events USING gin (payload jsonb_path_ops);

CREATE TABLE event_edges (
  event_id          uuid NOT NULL REFERENCES events(id) ON DELETE CASCADE,
  app_id            uuid NOT NULL,
  event_seq         bigint NOT NULL,
  edge_type         text NOT NULL,
  target_node_type  text NOT NULL CHECK (target_node_type IN ('platform_user', 'file')),
  target_node_id    uuid NOT NULL,
  ord               int NOT NULL,
  PRIMARY KEY (event_id, ord)
);
CREATE INDEX event_edges_target_idx ON event_edges (app_id, target_node_id, edge_type, event_seq);

CREATE TABLE event_schemas (
  id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id              uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  name                text NOT NULL,
  description         text,
  json_schema         jsonb NOT NULL,
  enforce_validation  boolean NOT NULL DEFAULT false,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  UNIQUE (app_id, name)
);

-- Idempotency-Key → the event (or message) the first request created, for 24 h.
CREATE TABLE idempotency_keys (
  app_id        uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  scope         text NOT NULL,
  key           text NOT NULL,
  request_hash  bytea NOT NULL,
  resource_id   uuid NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (app_id, scope, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);

-- Down Migration
DROP TABLE idempotency_keys;
DROP TABLE event_schemas;
DROP TABLE event_edges;
DROP TABLE events;
DROP TABLE ledger_heads;
DROP TABLE files;
DROP TABLE platform_users;
DROP TABLE users;

-- Up Migration
CREATE TABLE platform_connections (
  id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id                uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  platform              text NOT NULL,
  name                  text NOT NULL,
  -- Secret config fields sealed with SECRETS_KEY (src/crypto/secrets.ts); the rest in clear.
  config_sealed         text NOT NULL,
  config_public         jsonb NOT NULL DEFAULT '{}',
  -- Routing keys for shared webhook URLs (Meta family: page / IG account / WABA / phone number id).
  routing_ids           text[] NOT NULL DEFAULT '{}',
  webhook_secret_sealed text NOT NULL,
  status                text NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'DISABLED')),
  last_success_at       timestamptz,
  last_error_at         timestamptz,
  last_error            text,
  consecutive_failures  int NOT NULL DEFAULT 0,
  created_at            timestamptz NOT NULL DEFAULT now(),
  updated_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX platform_connections_app_idx ON platform_connections (app_id, created_at, id);
CREATE INDEX platform_connections_routing_idx ON platform_connections USING gin (routing_ids);

-- One inbound URL per Meta-family platform for the whole service (shared webhooks, docs/inbound.md).
CREATE TABLE shared_webhooks (
  platform       text PRIMARY KEY,
  id             uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  secret_sealed  text NOT NULL
);

CREATE TABLE conversations (
  id                      uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id                  uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  platform_connection_id  uuid NOT NULL REFERENCES platform_connections(id) ON DELETE CASCADE,
  external_id             text NOT NULL,
  thread_id               text NOT NULL DEFAULT '',
  name                    text,
  last_inbound_at         timestamptz,
  last_event_id           uuid,
  created_at              timestamptz NOT NULL DEFAULT now(),
  UNIQUE (platform_connection_id, external_id, thread_id)
);
CREATE INDEX conversations_app_idx ON conversations (app_id, created_at, id);

ALTER TABLE platform_users ADD CONSTRAINT platform_users_identity UNIQUE (app_id, platform_connection_id, external_id);

CREATE TABLE outbound_messages (
  id                      uuid PRIMARY KEY,
  app_id                  uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  platform_connection_id  uuid NOT NULL REFERENCES platform_connections(id) ON DELETE CASCADE,
  to_external_id          text NOT NULL,
  -- Order of messages to one recipient of one connection; a send waits for its predecessors.
  recipient_seq           bigint NOT NULL,
  text                    text NOT NULL,
  options                 jsonb NOT NULL DEFAULT '{}',
  file_ids                uuid[] NOT NULL DEFAULT '{}',
  status                  text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'sending', 'sent', 'failed')),
  external_message_id     text,
  error                   jsonb,
  -- Latest delivery status the platform reported (sent < delivered < read); never moves back.
  delivery_status         text,
  attempts                int NOT NULL DEFAULT 0,
  created_at              timestamptz NOT NULL DEFAULT now(),
  finished_at             timestamptz
);
CREATE INDEX outbound_messages_recipient_idx ON outbound_messages (platform_connection_id, to_external_id, recipient_seq);
CREATE INDEX outbound_messages_external_idx ON outbound_messages (platform_connection_id, external_message_id);

CREATE TABLE recipient_counters (
  platform_connection_id  uuid NOT NULL REFERENCES platform_connections(id) ON DELETE CASCADE,
  to_external_id          text NOT NULL,
  seq                     bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (platform_connection_id, to_external_id)
);

ALTER TABLE files ADD COLUMN sha256 text, ADD COLUMN storage text NOT NULL DEFAULT 'postgres',
  ADD COLUMN storage_key text, ADD COLUMN data bytea, ADD COLUMN source jsonb;

-- Down Migration
ALTER TABLE files DROP COLUMN sha256, DROP COLUMN storage, DROP COLUMN storage_key, DROP COLUMN data, DROP COLUMN source;
DROP TABLE recipient_counters;
DROP TABLE outbound_messages;
ALTER TABLE platform_users DROP CONSTRAINT platform_users_identity;
DROP TABLE conversations;
DROP TABLE shared_webhooks;
DROP TABLE platform_connections;

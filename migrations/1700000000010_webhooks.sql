-- Up Migration

-- Outbound webhook subscriptions (docs/guide.md, Webhooks). Secrets are sealed with SECRETS_KEY; during a
-- rotation the previous secret keeps signing (beside the new one) until previous_expires_at.
CREATE TABLE webhook_subscriptions (
  id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id                 uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  name                   text NOT NULL,
  target_url             text NOT NULL,
  event_patterns         text[] NOT NULL,
  status                 text NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'PAUSED', 'DISABLED')),
  secret_sealed          text NOT NULL,
  previous_secret_sealed text,
  previous_expires_at    timestamptz,
  max_per_second         int CHECK (max_per_second IS NULL OR max_per_second > 0),
  -- Deliveries that ended `failed` in a row; reset by any delivered one (auto-disable rule).
  consecutive_failures   int NOT NULL DEFAULT 0,
  disabled_at            timestamptz,
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_subscriptions_app_idx ON webhook_subscriptions (app_id, created_at, id);

-- One delivery per (subscription, event): the unique key is what makes a replayed ledger job
-- queue nothing twice. `body` is the exact text that is signed and sent (text, not jsonb, so
-- key order and spacing survive), reused by every retry and replay.
CREATE TABLE webhook_deliveries (
  id                  uuid PRIMARY KEY,
  app_id              uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  subscription_id     uuid NOT NULL REFERENCES webhook_subscriptions(id) ON DELETE CASCADE,
  event_id            uuid NOT NULL,
  event_type          text NOT NULL,
  status              text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'retrying', 'delivered', 'failed')),
  body                text NOT NULL,
  -- Attempts made over the delivery's life (retries and manual re-sends included).
  attempt_count       int NOT NULL DEFAULT 0,
  -- Bumped by a manual retry or a replay: names the BullMQ job of that run.
  run                 int NOT NULL DEFAULT 0,
  first_attempt_ts    bigint,
  last_status_code    int,
  last_error          text,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  UNIQUE (subscription_id, event_id)
);
CREATE INDEX webhook_deliveries_app_idx ON webhook_deliveries (app_id, subscription_id, created_at);

-- One row per attempt (the delivery log); test sends have no delivery. `n` orders the log.
CREATE TABLE webhook_delivery_logs (
  n                bigserial PRIMARY KEY,
  id               uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
  app_id           uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  subscription_id  uuid NOT NULL REFERENCES webhook_subscriptions(id) ON DELETE CASCADE,
  delivery_id      uuid REFERENCES webhook_deliveries(id) ON DELETE CASCADE,
  event_id         uuid NOT NULL,
  event_type       text NOT NULL,
  status           text NOT NULL CHECK (status IN ('pending', 'retrying', 'delivered', 'failed')),
  status_code      int,
  attempt_count    int NOT NULL,
  duration_ms      int NOT NULL,
  error_message    text,
  request_body     text NOT NULL,
  response_body    text,
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_delivery_logs_sub_idx ON webhook_delivery_logs (app_id, subscription_id, n);
CREATE INDEX webhook_delivery_logs_created_idx ON webhook_delivery_logs (created_at);

-- Down Migration
DROP TABLE webhook_delivery_logs;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_subscriptions;

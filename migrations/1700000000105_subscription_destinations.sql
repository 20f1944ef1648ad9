-- Up Migration
-- A subscription delivers either over HTTP (`webhook`, the default and every existing row) or
-- into a customer's broker (docs/destinations.md). A broker destination keeps its settings in
-- `destination_config` (shown to the owner) and its URL, which may carry credentials, sealed in
-- `destination_secret_sealed` like the signing secret; `target_url` then holds that URL
-- without credentials, for display and logs.
ALTER TABLE webhook_subscriptions
  ADD COLUMN destination text NOT NULL DEFAULT 'webhook',
  ADD COLUMN destination_config jsonb,
  ADD COLUMN destination_secret_sealed text;

-- Down Migration
ALTER TABLE webhook_subscriptions
  DROP COLUMN destination_secret_sealed,
  DROP COLUMN destination_config,
  DROP COLUMN destination;

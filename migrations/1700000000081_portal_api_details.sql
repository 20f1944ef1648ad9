-- Up Migration
-- What the developer portal shows that the API did not keep (src/http/api-keys.ts, connections, webhook attempts).

-- When a key was last used, to the minute (src/auth/api-keys.ts): shown by GET /v1/api-keys.
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;

-- When the platform last delivered to a connection (its health, GET /v1/platform-connections).
ALTER TABLE platform_connections ADD COLUMN last_inbound_at timestamptz;

-- What each webhook attempt sent and got back, beyond the bodies (the portal's attempt view):
-- the request headers as sent, the receiver's response headers, and when the next attempt is due.
ALTER TABLE webhook_delivery_logs
  ADD COLUMN request_headers  jsonb,
  ADD COLUMN response_headers jsonb,
  ADD COLUMN next_retry_at    timestamptz;

-- One delivery's attempts (GET /v1/webhook-deliveries/:id); it also serves the cascade when
-- retention deletes deliveries.
CREATE INDEX webhook_delivery_logs_delivery_idx ON webhook_delivery_logs (delivery_id, n) WHERE delivery_id IS NOT NULL;

-- Down Migration
DROP INDEX webhook_delivery_logs_delivery_idx;
ALTER TABLE webhook_delivery_logs DROP COLUMN request_headers, DROP COLUMN response_headers, DROP COLUMN next_retry_at;
ALTER TABLE platform_connections DROP COLUMN last_inbound_at;
ALTER TABLE api_keys DROP COLUMN last_used_at;

-- Up Migration
-- Follows 1700000000010_webhooks.sql (already applied on main, so not edited): first attempts
-- are dispatched per event, and attempt logs stop copying the delivery body.

-- The first-attempt job of an event finds its deliveries by (app, event).
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (app_id, event_id);
-- Nothing lists deliveries by subscription and time; the index only cost inserts.
DROP INDEX webhook_deliveries_app_idx;
-- Attempts rewrite status and counters only (no indexed column): spare room per page keeps
-- those updates HOT.
ALTER TABLE webhook_deliveries SET (fillfactor = 80);
-- NULL for a delivery's attempts: the body sent is the delivery's own (identical bytes).
ALTER TABLE webhook_delivery_logs ALTER COLUMN request_body DROP NOT NULL;

-- Down Migration
ALTER TABLE webhook_delivery_logs ALTER COLUMN request_body SET NOT NULL;
ALTER TABLE webhook_deliveries RESET (fillfactor);
CREATE INDEX webhook_deliveries_app_idx ON webhook_deliveries (app_id, subscription_id, created_at);
DROP INDEX webhook_deliveries_event_idx;

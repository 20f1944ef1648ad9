-- Up Migration
-- Channels and scoped embeds (src/ledger/event-scope.ts). An event may carry a few channels:
-- tags an application puts on its events, one per customer of its own for instance. Readers
-- filter by them; a webhook subscription may select by them (`channels`), and one made in a
-- scoped portal session is confined to that session's scope (`scope`), in fan-out and replay.
-- A portal session may be minted with a scope (`event_scope`): channels and/or type patterns.
-- NULL scope = unscoped, as before. A constant default adds the column without a rewrite.
ALTER TABLE events ADD COLUMN channels text[] NOT NULL DEFAULT '{}';
-- Partial: most events carry no channel, and a channel filter never looks for an empty list.
CREATE INDEX events_channels_idx ON events USING gin (channels) WHERE channels <> '{}';
ALTER TABLE webhook_subscriptions ADD COLUMN channels text[], ADD COLUMN scope jsonb;
ALTER TABLE portal_sessions ADD COLUMN event_scope jsonb;

-- Down Migration
ALTER TABLE portal_sessions DROP COLUMN event_scope;
ALTER TABLE webhook_subscriptions DROP COLUMN channels, DROP COLUMN scope;
DROP INDEX events_channels_idx;
ALTER TABLE events DROP COLUMN channels;

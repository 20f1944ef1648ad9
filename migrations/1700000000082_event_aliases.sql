-- Up Migration
-- The documented event names that are not stored types (`message.read`, `message.telegram.inbound`…)
-- answer for one ledger row each: the writer stores the row's alias beside its type
-- (eventAlias in src/ledger/event-types.ts, the one statement of the rule), and listings
-- filtered by an alias read this index as they read events_type_idx for a stored type.
-- At most one alias per event, so a plain column (and a btree) does.
ALTER TABLE events ADD COLUMN event_alias text;

-- Rows written before this migration get the alias the rule gives them today. This is the
-- rule as of this migration, spelled in SQL once; the writer's rule is the live one.
UPDATE events SET event_alias = 'message.' || (payload->>'status')
 WHERE event_type = 'message.status' AND payload->>'status' IN ('delivered', 'read', 'failed');
UPDATE events SET event_alias = 'message.' || (payload->>'platform') || '.inbound'
 WHERE event_type = 'message.inbound'
   AND payload->>'platform' IN ('telegram', 'whatsapp', 'messenger', 'instagram', 'slack', 'discord', 'sms', 'email');

CREATE INDEX events_alias_idx ON events (app_id, event_alias text_pattern_ops, seq) WHERE event_alias IS NOT NULL;

-- Down Migration
DROP INDEX events_alias_idx;
ALTER TABLE events DROP COLUMN event_alias;

-- Up Migration
-- "Is an earlier message to this recipient still unsettled?" is asked for every send (and
-- "which is the next one?" for every settled one). On the full recipient index that walks the
-- recipient's whole history, settled messages included: a long conversation made every send
-- slower. Keyed on the unsettled rows only, it reads at most the few still under way. It
-- replaces the unsettled index on id, whose one reader (files still needed by an unsettled
-- message, src/files/files.ts) scans the same rows. finished_at is NULL exactly while the
-- status is queued or sending; the constraint holds the two together.
ALTER TABLE outbound_messages ADD CONSTRAINT outbound_messages_finished_with_status
  CHECK ((finished_at IS NULL) = (status IN ('queued', 'sending'))) NOT VALID;
ALTER TABLE outbound_messages VALIDATE CONSTRAINT outbound_messages_finished_with_status;
CREATE INDEX outbound_messages_pending_idx ON outbound_messages (platform_connection_id, to_external_id, recipient_seq)
  WHERE finished_at IS NULL;
DROP INDEX outbound_messages_unsettled_idx;

-- A recipient the gateway has only sent to has no name; name search (ILIKE, src/identity/users.ts)
-- never matches a NULL, so those rows need no entry in the trigram indexes.
DROP INDEX users_name_trgm_idx;
CREATE INDEX users_name_trgm_idx ON users USING gin (name gin_trgm_ops) WHERE name IS NOT NULL;
DROP INDEX platform_users_name_trgm_idx;
CREATE INDEX platform_users_name_trgm_idx ON platform_users USING gin (name gin_trgm_ops) WHERE name IS NOT NULL;

-- Down Migration
DROP INDEX platform_users_name_trgm_idx;
CREATE INDEX platform_users_name_trgm_idx ON platform_users USING gin (name gin_trgm_ops);
DROP INDEX users_name_trgm_idx;
CREATE INDEX users_name_trgm_idx ON users USING gin (name gin_trgm_ops);
CREATE INDEX outbound_messages_unsettled_idx ON outbound_messages (id) WHERE finished_at IS NULL;
DROP INDEX outbound_messages_pending_idx;
ALTER TABLE outbound_messages DROP CONSTRAINT outbound_messages_finished_with_status;

-- Up Migration
-- The scheduled pruners (src/retention/registry.ts) find what is past its retention through
-- these, one bounded chunk at a time, instead of scanning the whole table for every chunk.
CREATE INDEX files_created_idx ON files (created_at);
CREATE INDEX outbound_messages_finished_idx ON outbound_messages (finished_at) WHERE finished_at IS NOT NULL;
-- A file an unsettled message carries is not pruned; those messages are few at any moment.
CREATE INDEX outbound_messages_unsettled_idx ON outbound_messages (id) WHERE status IN ('queued', 'sending');

-- Down Migration
DROP INDEX outbound_messages_unsettled_idx;
DROP INDEX outbound_messages_finished_idx;
DROP INDEX files_created_idx;

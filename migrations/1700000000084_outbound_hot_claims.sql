-- Up Migration
-- Claiming a message (queued → sending, with its owner and lease) changes no indexed column
-- once the unsettled index is keyed on finished_at instead of status, so the claim becomes a
-- heap-only (HOT) update: no new entry in any of the table's five indexes. The free space left
-- in each page (fillfactor) is where HOT puts the new row version. finished_at is set exactly
-- when status leaves queued/sending (src/messages/settle.ts, delivery.ts), so the index holds
-- the same rows as before.
DROP INDEX outbound_messages_unsettled_idx;
CREATE INDEX outbound_messages_unsettled_idx ON outbound_messages (id) WHERE finished_at IS NULL;
ALTER TABLE outbound_messages SET (fillfactor = 85);

-- Down Migration
ALTER TABLE outbound_messages RESET (fillfactor);
DROP INDEX outbound_messages_unsettled_idx;
CREATE INDEX outbound_messages_unsettled_idx ON outbound_messages (id) WHERE status IN ('queued', 'sending');

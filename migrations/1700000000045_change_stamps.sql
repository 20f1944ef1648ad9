-- Up Migration
-- Change stamps (src/change-stamps.ts): a change to records that every process caches (API
-- keys, event schemas) moves its stamp in the same transaction, so a cached copy is used only
-- while the stamp it was loaded under still stands. Service-wide, not per application: such
-- changes are rare, and a key is looked up before its application is known.
CREATE TABLE change_stamps (
  name  text PRIMARY KEY,
  stamp bigint NOT NULL DEFAULT 0
);
INSERT INTO change_stamps (name) VALUES ('api-keys'), ('event-schemas');

-- Down Migration
DROP TABLE change_stamps;

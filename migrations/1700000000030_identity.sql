-- Up Migration

-- Users across platforms. A user that was merged away keeps its row as a tombstone pointing
-- at the survivor (`merged_into`), so reads of its id can answer with that pointer and event
-- filters on it keep resolving. Merges compress pointers (every tombstone names the final
-- survivor), so resolution is one hop; resolve_user_id still follows chains defensively.
ALTER TABLE users
  ADD COLUMN merged_into  uuid REFERENCES users(id),
  ADD COLUMN merged_at    timestamptz,
  ADD COLUMN updated_at   timestamptz NOT NULL DEFAULT now(),
  -- The connected account itself (bot, page, number): not a person, never merged or linked.
  ADD COLUMN is_system    boolean NOT NULL DEFAULT false,
  ADD CONSTRAINT users_not_merged_into_self CHECK (merged_into IS DISTINCT FROM id),
  ADD CONSTRAINT users_merged_pair CHECK ((merged_into IS NULL) = (merged_at IS NULL)),
  ADD CONSTRAINT users_metadata_size CHECK (octet_length(metadata::text) <= 65536);
CREATE INDEX users_live_idx ON users (app_id, created_at, id) WHERE merged_into IS NULL;
CREATE INDEX users_merged_into_idx ON users (merged_into) WHERE merged_into IS NOT NULL;

CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX users_name_trgm_idx ON users USING gin (name gin_trgm_ops);
CREATE INDEX platform_users_name_trgm_idx ON platform_users USING gin (name gin_trgm_ops);
CREATE INDEX platform_users_external_idx ON platform_users (app_id, external_id);
DROP INDEX platform_users_user_idx;
CREATE INDEX platform_users_user_idx ON platform_users (user_id, app_id);

-- Every platform user belongs to exactly one user. Platform users seen before this migration
-- get their own user now; from here on the row cannot exist without one.
WITH m AS (
  SELECT id AS pu_id, gen_random_uuid() AS user_id, app_id, name, is_system_user
    FROM platform_users WHERE user_id IS NULL
), u AS (
  INSERT INTO users (id, app_id, name, is_system) SELECT user_id, app_id, name, is_system_user FROM m RETURNING id
)
UPDATE platform_users p SET user_id = m.user_id FROM m WHERE p.id = m.pu_id;

-- The application code always names the user (src/identity/platform-users.ts); this default
-- keeps the rule for any other writer (fixtures, operators) instead of failing them.
CREATE FUNCTION platform_user_default_user() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.user_id IS NULL THEN
    INSERT INTO users (app_id, name, is_system) VALUES (NEW.app_id, NEW.name, NEW.is_system_user) RETURNING id INTO NEW.user_id;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER platform_users_default_user BEFORE INSERT ON platform_users
  FOR EACH ROW WHEN (NEW.user_id IS NULL) EXECUTE FUNCTION platform_user_default_user();
ALTER TABLE platform_users ALTER COLUMN user_id SET NOT NULL;

-- The live user an id stands for: itself, or the survivor it was merged into. NULL when the
-- id is not a user of the application. Event filters (userId, hasEdge) go through it.
CREATE FUNCTION resolve_user_id(p_app uuid, p_id uuid) RETURNS uuid LANGUAGE sql STABLE AS $$
  WITH RECURSIVE chain(id, merged_into, depth) AS (
    SELECT id, merged_into, 0 FROM users WHERE app_id = p_app AND id = p_id
    UNION ALL
    SELECT u.id, u.merged_into, c.depth + 1
      FROM chain c JOIN users u ON u.id = c.merged_into AND u.app_id = p_app
     WHERE c.depth < 64
  )
  SELECT id FROM chain WHERE merged_into IS NULL LIMIT 1
$$;

-- One row per merge (a source is merged once): what moved, and the event recording it, so a
-- repeated request (or a retried job) answers the same and re-drives the same event.
CREATE TABLE user_merges (
  source_user_id     uuid PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
  app_id             uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  target_user_id     uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  platform_user_ids  uuid[] NOT NULL,
  event_id           uuid NOT NULL,
  link_code_id       uuid,
  created_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_merges_target_idx ON user_merges (app_id, target_user_id);

-- Link codes are stored as a hash: whoever reads the table cannot link themselves.
CREATE TABLE link_codes (
  id                        uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id                    uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  code_hash                 bytea NOT NULL,
  user_id                   uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  created_at                timestamptz NOT NULL DEFAULT now(),
  expires_at                timestamptz NOT NULL,
  used_at                   timestamptz,
  used_by_platform_user_id  uuid REFERENCES platform_users(id) ON DELETE SET NULL,
  -- The user the code's owner ended up as, and the user merged into it (if any), for replays.
  result_user_id            uuid,
  merged_user_id            uuid,
  via                       text CHECK (via IN ('inbound', 'api')),
  UNIQUE (app_id, code_hash)
);
CREATE INDEX link_codes_expiry_idx ON link_codes (expires_at);

-- Who took part in a conversation, derived from committed events' platform-user edges by the
-- ledger's after-commit hook (src/conversations/participants.ts). No foreign keys to
-- conversations/platform_users: a hook must never fail on data (it would fail the ledger
-- batch); reads join, so rows of deleted records are invisible.
CREATE TABLE conversation_participants (
  conversation_id   uuid NOT NULL,
  platform_user_id  uuid NOT NULL,
  app_id            uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  first_seen_at     timestamptz NOT NULL,
  last_seen_at      timestamptz NOT NULL,
  PRIMARY KEY (conversation_id, platform_user_id)
);
CREATE INDEX conversation_participants_pu_idx ON conversation_participants (app_id, platform_user_id);

INSERT INTO conversation_participants (conversation_id, platform_user_id, app_id, first_seen_at, last_seen_at)
SELECT e.conversation_id, x.target_node_id, e.app_id, min(e.created_at), max(e.created_at)
  FROM events e JOIN event_edges x ON x.event_id = e.id
 WHERE e.conversation_id IS NOT NULL AND x.target_node_type = 'platform_user'
 GROUP BY e.conversation_id, x.target_node_id, e.app_id;

CREATE INDEX conversations_connection_idx ON conversations (app_id, platform_connection_id, created_at, id);

-- Down Migration
DROP INDEX conversations_connection_idx;
DROP TABLE conversation_participants;
DROP TABLE link_codes;
DROP TABLE user_merges;
DROP FUNCTION resolve_user_id(uuid, uuid);
ALTER TABLE platform_users ALTER COLUMN user_id DROP NOT NULL;
DROP TRIGGER platform_users_default_user ON platform_users;
DROP FUNCTION platform_user_default_user();
DROP INDEX platform_users_user_idx;
CREATE INDEX platform_users_user_idx ON platform_users (user_id);
DROP INDEX platform_users_external_idx;
DROP INDEX platform_users_name_trgm_idx;
DROP INDEX users_name_trgm_idx;
DROP INDEX users_merged_into_idx;
DROP INDEX users_live_idx;
ALTER TABLE users DROP CONSTRAINT users_metadata_size, DROP CONSTRAINT users_merged_pair, DROP CONSTRAINT users_not_merged_into_self,
  DROP COLUMN is_system, DROP COLUMN updated_at, DROP COLUMN merged_at, DROP COLUMN merged_into;

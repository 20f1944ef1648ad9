-- Up Migration
-- A portal session holds the scopes it was made with, never beyond its maker's (src/auth/scopes.ts),
-- and of those only what its areas use (src/portal/areas.ts); until now every session had all.
-- Existing rows: the maker's scopes are known exactly. A session made with a key gets that key's
-- scopes (keys' scopes never change, and a session dies with its key, so the row is there); one
-- made by the operator CLI gets every scope. Then the area cut: `webhooks` alone uses `admin`.
ALTER TABLE portal_sessions ADD COLUMN scopes text[];
UPDATE portal_sessions s
   SET scopes = ARRAY(
     SELECT sc FROM unnest(coalesce(
         (SELECT k.scopes FROM api_keys k WHERE k.id = s.created_by_key_id),
         ARRAY['events:read', 'events:write', 'users:read', 'users:write', 'admin'])) AS sc
      WHERE 'all' = ANY (s.areas) OR sc = 'admin');
ALTER TABLE portal_sessions ALTER COLUMN scopes SET NOT NULL;

-- Down Migration
ALTER TABLE portal_sessions DROP COLUMN scopes;

-- Up Migration
-- Developer-portal sessions (src/portal/sessions.ts). A row starts as a one-time sign-in link
-- (token_hash, token_expires_at) and becomes a browser session when the link is exchanged
-- (session_hash, expires_at); the token hash is cleared then, so the link works once. Both
-- secrets are stored as SHA-256 hashes, like API keys: they carry 256 bits of entropy.
-- A session minted with an API key ends with that key (created_by_key_id); one minted by the
-- operator CLI has none and ends by expiry or revocation.
CREATE TABLE portal_sessions (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id            uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  created_by_key_id uuid REFERENCES api_keys(id) ON DELETE CASCADE,
  areas             text[] NOT NULL,
  theme             jsonb NOT NULL DEFAULT '{}',
  return_url        text,
  token_hash        bytea UNIQUE,
  token_expires_at  timestamptz NOT NULL,
  session_hash      bytea UNIQUE,
  expires_at        timestamptz,
  created_at        timestamptz NOT NULL DEFAULT now(),
  exchanged_at      timestamptz,
  revoked_at        timestamptz
);
CREATE INDEX portal_sessions_app_idx ON portal_sessions (app_id);
CREATE INDEX portal_sessions_key_idx ON portal_sessions (created_by_key_id) WHERE created_by_key_id IS NOT NULL;

-- Down Migration
DROP TABLE portal_sessions;

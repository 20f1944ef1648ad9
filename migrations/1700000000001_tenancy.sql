-- Up Migration
CREATE TABLE applications (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- Keys are stored only as a SHA-256 hash: they carry 256 bits of entropy, so a slow hash
-- buys nothing and a lookup by hash stays one index probe per request.
CREATE TABLE api_keys (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id      uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  key_hash    bytea NOT NULL UNIQUE,
  key_prefix  text NOT NULL,
  scopes      text[] NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz
);
CREATE INDEX api_keys_app_idx ON api_keys (app_id);

-- Down Migration
DROP TABLE api_keys;
DROP TABLE applications;

-- Up Migration
-- The public Meta verification handshake (GET /webhooks/<platform>?hub.verify_token=…) finds
-- its connection by a keyed hash of the verify token (SecretBox.fingerprint) instead of
-- decrypting every connection of the platform. Rows written before this migration have no
-- hash: SQL cannot decrypt their sealed config, so the receiver fills each on the first
-- handshake that meets it (connectionByVerifyToken in src/connections/connections.ts).
ALTER TABLE platform_connections ADD COLUMN verify_token_hash text;
CREATE INDEX platform_connections_verify_token_idx ON platform_connections (platform, verify_token_hash) WHERE status = 'ACTIVE';

-- Down Migration
DROP INDEX platform_connections_verify_token_idx;
ALTER TABLE platform_connections DROP COLUMN verify_token_hash;

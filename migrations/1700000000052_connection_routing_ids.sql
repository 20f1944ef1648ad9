-- Up Migration
-- A routing id (the platform account a connection speaks for: WhatsApp phone number id,
-- Messenger/Instagram page or account id, Slack bot user, Discord application, Twilio number
-- or Messaging Service, e-mail sender address) belongs to at most one connection across all
-- applications (src/connections/routing-ids.ts). The primary key is the rule: two
-- applications creating the same account at once cannot both win, whatever the timing.
-- A disabled connection keeps its claim, so re-enabling it can never collide; a deleted one
-- frees it (ON DELETE CASCADE).
CREATE TABLE connection_routing_ids (
  platform       text NOT NULL,
  routing_id     text NOT NULL,
  connection_id  uuid NOT NULL REFERENCES platform_connections(id) ON DELETE CASCADE,
  PRIMARY KEY (platform, routing_id)
);
CREATE INDEX connection_routing_ids_connection_idx ON connection_routing_ids (connection_id);

-- Existing connections claim their ids, the oldest first. Only ids stored in clear can be
-- read here; every platform with a routing id keeps it in config_public.
WITH ids AS (
  SELECT c.id, c.platform, c.created_at, v.routing_id
    FROM platform_connections c
    CROSS JOIN LATERAL (
      SELECT x AS routing_id FROM unnest(ARRAY[
        CASE WHEN c.platform = 'WHATSAPP' THEN c.config_public->>'phone_number_id' END,
        CASE WHEN c.platform IN ('MESSENGER', 'INSTAGRAM') THEN c.config_public->>'page_id' END,
        CASE WHEN c.platform = 'INSTAGRAM' THEN c.config_public->>'ig_account_id' END,
        CASE WHEN c.platform = 'SLACK' THEN c.config_public->>'bot_user_id' END,
        CASE WHEN c.platform = 'DISCORD' THEN c.config_public->>'application_id' END,
        CASE WHEN c.platform = 'SMS' THEN c.config_public->>'from' END,
        CASE WHEN c.platform = 'SMS' THEN c.config_public->>'messaging_service_sid' END,
        CASE WHEN c.platform = 'EMAIL'
             THEN lower(trim(coalesce(substring(c.config_public->>'from' from '<([^>]+)>\s*$'), c.config_public->>'from'))) END
      ]) AS x WHERE x IS NOT NULL AND x <> ''
    ) v
)
INSERT INTO connection_routing_ids (platform, routing_id, connection_id)
SELECT DISTINCT ON (platform, routing_id) platform, routing_id, id
  FROM ids ORDER BY platform, routing_id, created_at, id;

-- A connection that lost any of its ids to an older one (the duplicate a second application
-- created) gives up all its claims and is disabled, with the reason on its health, rather
-- than keep receiving another application's traffic. The operator sees the list below.
CREATE TEMP TABLE routing_losers ON COMMIT DROP AS
SELECT c.id, c.app_id, c.platform
  FROM platform_connections c
 WHERE EXISTS (
   SELECT 1 FROM connection_routing_ids r
    WHERE r.platform = c.platform AND r.connection_id <> c.id
      AND r.routing_id IN (
        c.config_public->>'phone_number_id', c.config_public->>'page_id', c.config_public->>'ig_account_id',
        c.config_public->>'bot_user_id', c.config_public->>'application_id', c.config_public->>'from',
        c.config_public->>'messaging_service_sid',
        lower(trim(coalesce(substring(c.config_public->>'from' from '<([^>]+)>\s*$'), c.config_public->>'from')))));
DELETE FROM connection_routing_ids WHERE connection_id IN (SELECT id FROM routing_losers);
UPDATE platform_connections SET status = 'DISABLED', updated_at = now(), last_error_at = now(),
       last_error = 'Disabled by migration: its platform account is connected by an older platform connection'
 WHERE id IN (SELECT id FROM routing_losers);
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT * FROM routing_losers LOOP
    RAISE WARNING 'platform connection % (application %, %) disabled: its routing id belongs to an older connection', r.id, r.app_id, r.platform;
  END LOOP;
END $$;

-- The claims table is the one record of routing ids now.
DROP INDEX platform_connections_routing_idx;
ALTER TABLE platform_connections DROP COLUMN routing_ids;

-- Down Migration
ALTER TABLE platform_connections ADD COLUMN routing_ids text[] NOT NULL DEFAULT '{}';
UPDATE platform_connections c SET routing_ids = ARRAY(SELECT r.routing_id FROM connection_routing_ids r WHERE r.connection_id = c.id ORDER BY r.routing_id);
CREATE INDEX platform_connections_routing_idx ON platform_connections USING gin (routing_ids);
DROP TABLE connection_routing_ids;

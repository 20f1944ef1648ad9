-- Up Migration
-- The events table (and its edges) partitioned by month of created_at, so that a retention
-- (EVENT_RETENTION_DAYS) drops whole months as tables instead of deleting rows, and every index
-- an insert touches stays one month's size (docs/SCALING.md §4). src/ledger/partitions.ts
-- creates months ahead and drops expired ones on a schedule.
--
-- Existing rows are not rewritten: the current table becomes the partition of everything before
-- the next month (`events_legacy`, dropped whole once its newest event is past the retention),
-- and months from there on get partitions of their own.
--
-- A unique key of a partitioned table must contain the partition key, so the primary key is
-- (id, created_at) and the ledger keeps event ids unique itself (src/ledger/write.ts: under the
-- application's lock, an id already present is not written again). Lookups by id alone use the
-- key's leading column in each partition. event_edges carries its event's created_at to be
-- partitioned alike; it can no longer reference events (that would need the pair as a key and
-- would forbid dropping a month), so it references the application for deletes instead.

ALTER TABLE event_edges DROP CONSTRAINT event_edges_event_id_fkey;
ALTER TABLE event_edges ADD COLUMN event_created_at timestamptz;
UPDATE event_edges x SET event_created_at = e.created_at FROM events e WHERE e.id = x.event_id;
-- Edges whose event is gone (none are expected: they cascaded) cannot be placed in a month.
DELETE FROM event_edges WHERE event_created_at IS NULL;
ALTER TABLE event_edges ALTER COLUMN event_created_at SET NOT NULL;

ALTER TABLE events RENAME TO events_legacy;
ALTER TABLE events_legacy DROP CONSTRAINT events_pkey;
ALTER TABLE events_legacy DROP CONSTRAINT events_app_id_seq_key;
ALTER INDEX events_type_idx RENAME TO events_legacy_type_idx;
ALTER INDEX events_conversation_idx RENAME TO events_legacy_conversation_idx;
ALTER INDEX events_created_idx RENAME TO events_legacy_created_idx;
ALTER INDEX events_payload_idx RENAME TO events_legacy_payload_idx;

CREATE TABLE events (
  id                      uuid NOT NULL,
  app_id                  uuid NOT NULL CONSTRAINT events_app_id_fkey REFERENCES applications(id) ON DELETE CASCADE,
  seq                     bigint NOT NULL,
  created_at              timestamptz NOT NULL,
  event_type              text NOT NULL,
  payload                 jsonb NOT NULL,
  attachments             jsonb NOT NULL DEFAULT '[]',
  origin_event_id         uuid,
  conversation_id         uuid,
  platform_connection_id  uuid,
  validation_errors       jsonb,
  PRIMARY KEY (id, created_at),
  -- seq is unique per application by construction (handed out under its lock); this is the
  -- cursor's paging index.
  UNIQUE (app_id, seq, created_at)
) PARTITION BY RANGE (created_at);
CREATE INDEX events_type_idx ON events (app_id, event_type text_pattern_ops, seq);
CREATE INDEX events_conversation_idx ON events (app_id, conversation_id, seq) WHERE conversation_id IS NOT NULL;
CREATE INDEX events_created_idx ON events (app_id, created_at);
CREATE INDEX events_payload_idx ON events USING gin (payload jsonb_path_ops);

ALTER TABLE event_edges RENAME TO event_edges_legacy;
ALTER TABLE event_edges_legacy DROP CONSTRAINT event_edges_pkey;
ALTER INDEX event_edges_target_idx RENAME TO event_edges_legacy_target_idx;

CREATE TABLE event_edges (
  event_id          uuid NOT NULL,
  app_id            uuid NOT NULL REFERENCES applications(id) ON DELETE CASCADE,
  event_seq         bigint NOT NULL,
  -- The event's created_at: the partition key, so an event's edges live in its month.
  event_created_at  timestamptz NOT NULL,
  edge_type         text NOT NULL,
  target_node_type  text NOT NULL CONSTRAINT event_edges_target_node_type_check CHECK (target_node_type IN ('platform_user', 'file')),
  target_node_id    uuid NOT NULL,
  ord               int NOT NULL,
  PRIMARY KEY (event_id, ord, event_created_at)
) PARTITION BY RANGE (event_created_at);
CREATE INDEX event_edges_target_idx ON event_edges (app_id, target_node_id, edge_type, event_seq);

-- The legacy tables become the partitions of everything before the month after the newest
-- event (at least the next month); the validated CHECK spares ATTACH its own scan. Matching
-- indexes and the application foreign key are adopted, the new keys are built once here.
DO $$
DECLARE
  b timestamptz := date_trunc('month', greatest(now(), coalesce((SELECT max(created_at) FROM events_legacy), now())), 'UTC') + interval '1 month';
BEGIN
  EXECUTE format('ALTER TABLE events_legacy ADD CONSTRAINT events_legacy_range CHECK (created_at < %L)', b);
  EXECUTE format('ALTER TABLE events ATTACH PARTITION events_legacy FOR VALUES FROM (MINVALUE) TO (%L)', b);
  EXECUTE format('ALTER TABLE event_edges_legacy ADD CONSTRAINT event_edges_legacy_range CHECK (event_created_at < %L)', b);
  EXECUTE format('ALTER TABLE event_edges ATTACH PARTITION event_edges_legacy FOR VALUES FROM (MINVALUE) TO (%L)', b);
  -- Three months ahead from the start; the maintenance job keeps it so.
  FOR i IN 0..2 LOOP
    EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
      'events_p' || to_char((b + i * interval '1 month') AT TIME ZONE 'UTC', 'YYYYMM'), b + i * interval '1 month', b + (i + 1) * interval '1 month');
    EXECUTE format('CREATE TABLE %I PARTITION OF event_edges FOR VALUES FROM (%L) TO (%L)',
      'event_edges_p' || to_char((b + i * interval '1 month') AT TIME ZONE 'UTC', 'YYYYMM'), b + i * interval '1 month', b + (i + 1) * interval '1 month');
  END LOOP;
END $$;
ALTER TABLE events_legacy DROP CONSTRAINT events_legacy_range;
ALTER TABLE event_edges_legacy DROP CONSTRAINT event_edges_legacy_range;

-- Down Migration
-- Only while everything is still in the legacy partitions (no month partition holds a row).
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM events WHERE tableoid <> 'events_legacy'::regclass) THEN
    RAISE EXCEPTION 'events were written to month partitions; copy them into events_legacy before migrating down';
  END IF;
END $$;
ALTER TABLE events DETACH PARTITION events_legacy;
ALTER TABLE event_edges DETACH PARTITION event_edges_legacy;
DROP TABLE events;
DROP TABLE event_edges;
ALTER TABLE events_legacy RENAME TO events;
ALTER TABLE event_edges_legacy RENAME TO event_edges;
ALTER INDEX events_legacy_type_idx RENAME TO events_type_idx;
ALTER INDEX events_legacy_conversation_idx RENAME TO events_conversation_idx;
ALTER INDEX events_legacy_created_idx RENAME TO events_created_idx;
ALTER INDEX events_legacy_payload_idx RENAME TO events_payload_idx;
ALTER INDEX event_edges_legacy_target_idx RENAME TO event_edges_target_idx;
ALTER TABLE events DROP CONSTRAINT events_legacy_pkey;
ALTER TABLE events DROP CONSTRAINT events_legacy_app_id_seq_created_at_key;
ALTER TABLE events ADD PRIMARY KEY (id), ADD UNIQUE (app_id, seq);
ALTER TABLE event_edges DROP CONSTRAINT event_edges_legacy_pkey;
ALTER TABLE event_edges DROP COLUMN event_created_at;
ALTER TABLE event_edges DROP CONSTRAINT event_edges_app_id_fkey;
ALTER TABLE event_edges ADD PRIMARY KEY (event_id, ord), ADD FOREIGN KEY (event_id) REFERENCES events(id) ON DELETE CASCADE;

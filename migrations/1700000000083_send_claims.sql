-- Up Migration
-- A send is claimed for one platform call with an owner and a lease: the batch send job and the
-- per-message job can both reach a message, and only the holder of a live claim may call the
-- platform for it. A claim whose lease ran out belongs to an owner that died or stalled with
-- the call possibly in flight: the message then fails as DELIVERY_UNCERTAIN, never a resend.
ALTER TABLE outbound_messages ADD COLUMN claimed_by uuid, ADD COLUMN lease_until timestamptz;

-- Down Migration
ALTER TABLE outbound_messages DROP COLUMN lease_until, DROP COLUMN claimed_by;

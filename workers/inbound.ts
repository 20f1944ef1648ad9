import { UnrecoverableError } from 'bullmq';
import { loadConnection, loadConnectionById, recordInbound, type Connection } from '../src/connections/connections.js';
import { watchChanges } from '../src/change-feed.js';
import type { PlatformUserRef } from '../src/identity/platform-users.js';
import { lookupCache } from '../src/lookup-cache.js';
import { recordMessage, recordReaction, recordStatus, recordWatermark, type RecordContext } from '../src/inbound/records.js';
import { MalformedPayloadError } from '../src/errors.js';
import { storableText } from '../src/storable-text.js';
import { getAdapter } from '../src/platforms/registry.js';
import type { NormalisedRecord } from '../src/platforms/types.js';
import type { ProcessorDef } from './host.js';

/**
 * The inbound queue: normalise a verified platform delivery into records, then record each
 * (src/inbound/records.ts) under event ids derived from the platform's own ids, so a
 * redelivered payload or a retried job records nothing twice.
 */
export const inboundProcessor: ProcessorDef<'inbound'> = {
  queue: 'inbound',
  create(deps, services) {
    // Bursts of deliveries hit the same few connections: reuse their lookups briefly (the
    // receiver does the same, with the same bound on staleness).
    const connections = lookupCache<Connection | undefined>(deps.config.INBOUND_LOOKUP_CACHE_MS);
    const systemUsers = lookupCache<PlatformUserRef>(deps.config.INBOUND_LOOKUP_CACHE_MS);
    // A connection's name is part of its system user's key, so only the connections need clearing.
    watchChanges(deps, 'connections', () => connections.clear());
    return async (job) => {
      const d = job.data;
      const conn = await connections.get(d.connection_id, () =>
        d.app_id ? loadConnection(deps, d.app_id, d.connection_id) : loadConnectionById(deps, d.connection_id),
      );
      if (!conn) return { skipped: 'connection deleted' };
      let records: NormalisedRecord[];
      try {
        // A platform may deliver U+0000 in a text, or a field nested thousands deep where it
        // documents a string; the delivery is already acknowledged, so it is recorded in a form
        // PostgreSQL accepts (text repaired, parts past JSON_MAX_DEPTH replaced by a marker)
        // rather than failing on every attempt and being lost.
        const normalised = getAdapter(conn.platform).normalise({
          rawBody: Buffer.from(d.body, 'base64'),
          headers: d.headers,
          receivedAt: d.received_at,
        });
        records = storableText(normalised, deps.config.JSON_MAX_DEPTH);
      } catch (err) {
        // Only a delivery that is not the platform's shape is dropped; any other throw is a bug, retried and visible.
        if (err instanceof MalformedPayloadError) throw new UnrecoverableError(`malformed ${conn.platform} payload: ${err.message}`);
        throw err;
      }
      const ctx: RecordContext = {
        deps,
        files: services.files,
        linkCodes: services.linkCodes,
        conn,
        attempt: job.attemptsMade,
        finalAttempt: job.attemptsMade + 1 >= (job.opts.attempts ?? 1),
        systemUsers,
      };
      for (const r of records) {
        if (r.kind === 'message') await recordMessage(ctx, r);
        else if (r.kind === 'status') await recordStatus(ctx, r);
        else if (r.kind === 'watermark') await recordWatermark(ctx, r);
        else await recordReaction(ctx, r);
      }
      await recordInbound(deps, conn, d.received_at);
      return { records: records.length };
    };
  },
};

import type { Connection } from '../connections/connections.js';
import { getAdapter } from '../platforms/registry.js';
import type { InboundRequest } from '../platforms/types.js';
import type { JobData } from '../queues.js';

/** Headers a normaliser or signature may need later; everything else is dropped before queueing. */
const KEPT_HEADERS = ['content-type', 'x-slack-retry-num', 'x-slack-request-timestamp', 'x-signature-timestamp', 'x-gateway-timestamp'];

/**
 * The inbound job of one verified delivery, under the platform's dedupe key (so a redelivery is
 * the same job); undefined when the body is not a delivery of the platform at all. Every
 * delivery goes through here: the receiver's, the sandbox's simulated ones, and the reports a
 * platform schedules after a send.
 */
export function deliveryJob(
  conn: Pick<Connection, 'id' | 'appId' | 'platform'>,
  inbound: InboundRequest,
  body: Buffer = inbound.rawBody,
): JobData<'inbound'> | undefined {
  const dedupeKey = getAdapter(conn.platform).dedupeKey({ ...inbound, rawBody: body });
  if (dedupeKey === undefined) return undefined;
  const headers = Object.fromEntries(KEPT_HEADERS.filter((h) => inbound.headers[h]).map((h) => [h, inbound.headers[h]]));
  return {
    connection_id: conn.id,
    app_id: conn.appId,
    platform: conn.platform,
    received_at: new Date(inbound.now).toISOString(),
    headers,
    body: body.toString('base64'),
    dedupe_key: dedupeKey,
  };
}

/** A JSON delivery the service makes itself (no HTTP request behind it), as the receiver would have seen it at `now`. */
export const ownDelivery = (rawBody: Buffer, now: number): InboundRequest => ({
  method: 'POST',
  rawBody,
  headers: { 'content-type': 'application/json' },
  query: {},
  publicUrl: '',
  now,
});

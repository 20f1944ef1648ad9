import type { InboundRequest } from '../../../src/platforms/types.js';

/** An InboundRequest as the receiver builds it: lower-cased headers, raw bytes. */
export function inboundReq(body: unknown, headers: Record<string, string> = {}, o: Partial<InboundRequest> = {}): InboundRequest {
  const raw = Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  return {
    method: 'POST',
    rawBody: raw,
    headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])),
    query: {},
    publicUrl: 'https://gw.example.com/webhooks/x/y',
    now: Date.now(),
    ...o,
  };
}

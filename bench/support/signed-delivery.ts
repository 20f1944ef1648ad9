import { createHmac, randomUUID } from 'node:crypto';

const key = Buffer.alloc(32, 7);
const secret = `whsec_${key.toString('base64')}`;

/**
 * One delivery as the bare floors send it: a webhook body of the usual size, signed as a real
 * delivery with a generated secret is (X-Service-Signature plus Standard Webhooks).
 */
export function signedDelivery(i: number, eventType: string) {
  const id = randomUUID();
  const body = JSON.stringify({
    id,
    subscription_id: randomUUID(),
    event_id: randomUUID(),
    event_type: eventType,
    app_id: randomUUID(),
    payload: { i, order_id: `ord-${i}`, amount: i % 1000, note: 'a small realistic payload' },
    edges: {},
    created_at: new Date().toISOString(),
    timestamp: new Date().toISOString(),
  });
  const ts = Math.floor(Date.now() / 1000);
  const headers: Record<string, string> = {
    'x-service-signature': `sha256=${createHmac('sha256', secret).update(`${ts}.${body}`).digest('hex')}`,
    'x-service-timestamp': String(ts),
    'x-service-delivery-id': id,
    'webhook-id': id,
    'webhook-timestamp': String(ts),
    'webhook-signature': `v1,${createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest('base64')}`,
  };
  return { id, body, headers };
}

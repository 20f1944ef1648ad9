import { z } from 'zod';
import { unwrap } from '../errors.js';
import { deliveriesOfEvent, getDelivery } from '../webhooks/deliveries.js';
import { listSubscriptions } from '../webhooks/subscriptions.js';
import type { Api } from './api.js';
import { confineDelivery, deliveryStatus, logOut } from './webhooks.js';

const deliveryOut = z.object({
  id: z.string(),
  subscription_id: z.string(),
  event_id: z.string(),
  event_type: z.string(),
  status: deliveryStatus,
  attempt_count: z.number(),
  last_status_code: z.number().nullable(),
  last_error: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});

/** Deliveries as such (one event to one subscription), beside each subscription's attempt log. */
export function registerWebhookDeliveryRoutes(api: Api): void {
  api.route({
    method: 'get',
    path: '/v1/webhook-deliveries',
    operationId: 'listEventDeliveries',
    description: "For one event (`event_id`), the webhook deliveries it caused: one per subscription it matched, with each one's state.",
    summary: 'The webhook deliveries an event caused, one per subscription it matched',
    scope: 'admin',
    query: z.strictObject({ event_id: z.string().max(100) }),
    responses: { 200: { description: 'Every delivery of the event, oldest first', schema: z.object({ data: z.array(deliveryOut) }) } },
    handler: async ({ deps, principal, query }) => {
      const data = await deliveriesOfEvent(deps, principal.appId, query.event_id);
      if (!principal.eventScope) return { status: 200, body: { data } };
      // A scoped session sees the deliveries of its own subscriptions only.
      const visible = new Set((await listSubscriptions(deps, principal.appId, principal.eventScope)).map((sub) => sub.id));
      return { status: 200, body: { data: data.filter((d) => visible.has(d.subscription_id)) } };
    },
  });

  api.route({
    method: 'get',
    path: '/v1/webhook-deliveries/:id',
    operationId: 'getWebhookDelivery',
    description:
      "One delivery with every attempt, newest first: the request headers and body as sent, the receiver's answer, and when the next retry is due.",
    summary: 'One delivery with its attempts, newest first: request headers and body as sent, the answer, next retry time',
    scope: 'admin',
    params: z.object({ id: z.string().max(100) }),
    responses: { 200: { description: 'The delivery', schema: deliveryOut.extend({ attempts: z.array(logOut) }) } },
    errors: ['NOT_FOUND'],
    handler: async ({ deps, principal, params }) => {
      await confineDelivery(deps, principal, params.id);
      return { status: 200, body: unwrap(await getDelivery(deps, principal.appId, params.id)) };
    },
  });
}

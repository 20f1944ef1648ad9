import { z } from 'zod';
import type { Principal } from '../auth/api-keys.js';
import type { Deps } from '../deps.js';
import { AppError, unwrap } from '../errors.js';
import { listDeliveryLogs } from '../webhooks/logs.js';
import { replayInput, replaySubscription, retryDelivery } from '../webhooks/replay.js';
import {
  createSubscription,
  createSubscriptionInput,
  deleteSubscription,
  getSubscription,
  listSubscriptions,
  rotateSecret,
  subscriptionWithin,
  deliveryWithin,
  updateSubscription,
  updateSubscriptionInput,
} from '../webhooks/subscriptions.js';
import { sendTestDelivery } from '../webhooks/test-send.js';
import type { Api } from './api.js';
import { destinationOutput } from '../destinations/inputs.js';

const status = z.enum(['ACTIVE', 'PAUSED', 'DISABLED']);
const subscriptionOut = z.object({
  id: z.string(),
  name: z.string(),
  target_url: z.string().describe("a webhook's receiver; a broker destination's URL without credentials"),
  destination: destinationOutput,
  event_patterns: z.array(z.string()),
  channels: z.array(z.string()).nullable().describe('only events on one of these channels; null: any'),
  scope: z
    .object({ channels: z.array(z.string()).optional(), event_types: z.array(z.string()).optional() })
    .nullable()
    .describe('the scoped portal session it was made in: it never matches an event outside it'),
  status,
  max_per_second: z.number().nullable(),
  consecutive_failures: z.number(),
  previous_secret_expires_at: z.string().nullable(),
  disabled_at: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export const deliveryStatus = z.enum(['pending', 'retrying', 'delivered', 'failed']);
export const logOut = z.object({
  id: z.string(),
  delivery_id: z.string().nullable(),
  event_id: z.string(),
  event_type: z.string(),
  status: deliveryStatus,
  status_code: z.number().nullable(),
  attempt_count: z.number(),
  duration: z.number().describe('milliseconds'),
  error_message: z.string().nullable(),
  request_body: z.string(),
  request_headers: z.record(z.string(), z.string()).nullable().describe('as sent, signature included'),
  response_body: z.string().nullable(),
  response_headers: z.record(z.string(), z.union([z.string(), z.array(z.string())])).nullable(),
  next_retry_at: z.string().nullable().describe('when the next attempt is due, while the delivery is retrying'),
  created_at: z.string(),
  cursor: z.string(),
});
const idParams = z.object({ id: z.string() });
const logsQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  after: z.string().max(200).optional(),
  status: deliveryStatus.optional(),
});

/**
 * A scoped portal session reaches only the subscriptions made in its scope (and their
 * deliveries): any other is not found, exactly as another application's.
 */
async function confine(deps: Deps, principal: Principal, id: string): Promise<void> {
  if (!(await subscriptionWithin(deps, principal.appId, id, principal.eventScope)))
    throw new AppError('NOT_FOUND', `No webhook subscription ${id}`);
}

export async function confineDelivery(deps: Deps, principal: Principal, id: string): Promise<void> {
  if (!(await deliveryWithin(deps, principal.appId, id, principal.eventScope)))
    throw new AppError('NOT_FOUND', `No webhook delivery ${id}`);
}

export function registerWebhookRoutes(api: Api): void {
  const base = '/v1/webhook-subscriptions';
  api.route({
    method: 'post',
    path: base,
    operationId: 'createWebhook',
    description:
      "Subscribes a URL — or a broker destination (`destination`: a RabbitMQ exchange, a NATS JetStream subject) — to the events matching the patterns (an exact type, `prefix.*` or `*`). Each matching event is delivered signed with the subscription's secret, which this answer shows once. Deliveries are at least once and unordered: deduplicate by `event_id`.",
    summary: 'Subscribe a URL or a broker destination to events matching patterns; a generated secret is returned once',
    scope: 'admin',
    body: createSubscriptionInput,
    responses: {
      201: {
        description: 'The subscription (with `secret` only when the service generated it)',
        schema: subscriptionOut.extend({ secret: z.string().optional() }),
      },
    },
    errors: ['INVALID_WEBHOOK_TARGET'],
    handler: async ({ deps, principal, body }) => ({
      status: 201,
      body: unwrap(await createSubscription(deps, principal.appId, body, principal.eventScope)),
    }),
  });
  api.route({
    method: 'get',
    path: base,
    operationId: 'listWebhooks',
    description: "The application's webhook subscriptions, without their secrets.",
    summary: 'List webhook subscriptions',
    scope: 'admin',
    responses: { 200: { description: 'All subscriptions', schema: z.object({ data: z.array(subscriptionOut) }) } },
    handler: async ({ deps, principal }) => ({
      status: 200,
      body: { data: await listSubscriptions(deps, principal.appId, principal.eventScope) },
    }),
  });
  api.route({
    method: 'get',
    path: `${base}/:id`,
    operationId: 'getWebhook',
    description: 'One webhook subscription: URL, patterns, state and throttle (its secret is never shown again).',
    summary: 'One webhook subscription',
    scope: 'admin',
    params: idParams,
    responses: { 200: { description: 'The subscription', schema: subscriptionOut } },
    errors: ['NOT_FOUND'],
    handler: async ({ deps, principal, params }) => {
      await confine(deps, principal, params.id);
      return { status: 200, body: unwrap(await getSubscription(deps, principal.appId, params.id)) };
    },
  });
  api.route({
    method: 'patch',
    path: `${base}/:id`,
    operationId: 'updateWebhook',
    description:
      "Changes a subscription's name, URL or destination, patterns or throttle, or pauses (PAUSED) and resumes (ACTIVE) it. A `destination` replaces the destination whole; a broker destination of the current kind may leave out `url` to keep the stored one, credentials included.",
    summary: 'Change name, URL or destination, patterns or throttle; pause (PAUSED) or resume (ACTIVE)',
    scope: 'admin',
    params: idParams,
    body: updateSubscriptionInput,
    responses: { 200: { description: 'The updated subscription', schema: subscriptionOut } },
    errors: ['NOT_FOUND', 'INVALID_WEBHOOK_TARGET'],
    handler: async ({ deps, principal, params, body }) => {
      await confine(deps, principal, params.id);
      return { status: 200, body: unwrap(await updateSubscription(deps, principal.appId, params.id, body)) };
    },
  });
  api.route({
    method: 'delete',
    path: `${base}/:id`,
    operationId: 'deleteWebhook',
    description: 'Deletes a subscription with its pending deliveries and its attempt log; nothing more is sent to its URL.',
    summary: 'Delete a subscription with its deliveries and logs',
    scope: 'admin',
    params: idParams,
    responses: { 204: { description: 'Deleted' } },
    errors: ['NOT_FOUND'],
    handler: async ({ deps, principal, params }) => {
      await confine(deps, principal, params.id);
      unwrap(await deleteSubscription(deps, principal.appId, params.id));
      return { status: 204 };
    },
  });
  api.route({
    method: 'post',
    path: `${base}/:id/rotate-secret`,
    operationId: 'rotateWebhookSecret',
    description:
      'Issues a new secret (shown once). For 24 hours every delivery is signed with both the new and the old secret, so a receiver can switch without losing a delivery.',
    summary: 'Replace the secret; the old one keeps signing beside it for 24 h',
    scope: 'admin',
    params: idParams,
    responses: {
      200: { description: 'The new secret (shown once)', schema: z.object({ secret: z.string(), previous_secret_expires_at: z.string() }) },
    },
    errors: ['NOT_FOUND'],
    handler: async ({ deps, principal, params }) => {
      await confine(deps, principal, params.id);
      return { status: 200, body: unwrap(await rotateSecret(deps, principal.appId, params.id)) };
    },
  });
  api.route({
    method: 'post',
    path: `${base}/:id/test`,
    operationId: 'testWebhook',
    description:
      "Sends a signed `webhook.test` delivery to the subscription's URL now and answers with what the receiver answered (status, time taken), to check a receiver before real events reach it.",
    summary: 'Send a signed webhook.test delivery now and report the answer',
    scope: 'admin',
    params: idParams,
    responses: {
      200: {
        description: 'What the receiver answered',
        schema: z.object({
          success: z.boolean(),
          status_code: z.number().nullable(),
          response_body: z.string().nullable(),
          duration: z.number(),
          error_message: z.string().nullable(),
        }),
      },
    },
    errors: ['NOT_FOUND'],
    handler: async ({ deps, principal, params }) => {
      await confine(deps, principal, params.id);
      return { status: 200, body: unwrap(await sendTestDelivery(deps, principal.appId, params.id)) };
    },
  });
  api.route({
    method: 'get',
    path: `${base}/:id/deliveries`,
    operationId: 'listWebhookDeliveries',
    description:
      "The attempts made for the subscription, newest first: the request as sent, the receiver's answer, and the next retry if any.",
    summary: 'Delivery attempt log, newest first',
    scope: 'admin',
    params: idParams,
    query: logsQuery,
    responses: {
      200: {
        description: 'A page of attempts',
        schema: z.object({ data: z.array(logOut), next_cursor: z.string().optional(), has_more: z.boolean() }),
      },
    },
    errors: ['NOT_FOUND', 'INVALID_CURSOR'],
    handler: async ({ deps, principal, params, query }) => {
      await confine(deps, principal, params.id);
      const page = unwrap(await listDeliveryLogs(deps, principal.appId, params.id, query));
      const last = page.logs.at(-1);
      return {
        status: 200,
        body: { data: page.logs, ...(page.hasMore && last ? { next_cursor: last.cursor } : {}), has_more: page.hasMore },
      };
    },
  });
  api.route({
    method: 'post',
    path: `${base}/:id/replay`,
    operationId: 'replayWebhook',
    description:
      'Queues again the delivery of every event matching the subscription after a time or a cursor, for a receiver that lost data. Events already queued for it are not doubled, and one call is bounded in how many it queues.',
    summary: 'Re-queue deliveries of every matching event after a time or cursor (bounded, deduplicated)',
    scope: 'admin',
    params: idParams,
    body: replayInput,
    responses: {
      202: {
        description: 'Queued',
        schema: z.object({
          queued: z.number(),
          already_queued: z.number(),
          scanned: z.number(),
          truncated: z.boolean(),
          next_since: z.string().optional(),
        }),
      },
    },
    errors: ['NOT_FOUND', 'CONFLICT'],
    handler: async ({ deps, principal, params, body }) => {
      await confine(deps, principal, params.id);
      return { status: 202, body: unwrap(await replaySubscription(deps, principal.appId, params.id, body.since)) };
    },
  });
  api.route({
    method: 'post',
    path: '/v1/webhook-deliveries/:id/retry',
    operationId: 'retryWebhookDelivery',
    description: 'Sends a delivery that failed again now, and starts its retry schedule anew.',
    summary: 'Re-send a failed delivery now, with a fresh retry schedule',
    scope: 'admin',
    params: idParams,
    responses: { 202: { description: 'Queued', schema: z.object({ id: z.string(), status: z.literal('pending'), run: z.number() }) } },
    errors: ['NOT_FOUND', 'CONFLICT'],
    handler: async ({ deps, principal, params }) => {
      await confineDelivery(deps, principal, params.id);
      return { status: 202, body: unwrap(await retryDelivery(deps, principal.appId, params.id)) };
    },
  });
}

import { unwrap } from '../errors.js';
import { firstRange, pageSize, parseInput } from './results.js';
import { listDeliveryLogs, type DeliveryLog } from '../webhooks/logs.js';
import { replaySubscription, retryDelivery } from '../webhooks/replay.js';
import {
  createSubscription,
  createSubscriptionInput,
  deleteSubscription,
  getSubscription,
  listSubscriptions,
  rotateSecret,
  updateSubscription,
  updateSubscriptionInput,
  type PublicSubscription,
} from '../webhooks/subscriptions.js';
import { sendTestDelivery } from '../webhooks/test-send.js';
import type { GqlContext } from './context.js';
import { destinationTypeDefs, toDestinationNode } from './destination-fields.js';
import type { GraphqlModule } from './schema.js';

const MAX_FIRST = 200;

const toNode = (s: PublicSubscription & { secret?: string }) => ({
  id: s.id,
  name: s.name,
  targetUrl: s.target_url,
  destination: toDestinationNode(s.destination),
  eventPatterns: s.event_patterns,
  channels: s.channels,
  status: s.status,
  maxPerSecond: s.max_per_second,
  consecutiveFailures: s.consecutive_failures,
  previousSecretExpiresAt: s.previous_secret_expires_at,
  createdAt: s.created_at,
  secret: s.secret ?? null,
});

const toLogNode = (l: DeliveryLog) => ({
  id: l.id,
  deliveryId: l.delivery_id,
  eventId: l.event_id,
  eventType: l.event_type,
  status: l.status,
  statusCode: l.status_code,
  attemptCount: l.attempt_count,
  duration: l.duration,
  errorMessage: l.error_message,
  requestBody: l.request_body,
  responseBody: l.response_body,
  requestHeaders: l.request_headers,
  responseHeaders: l.response_headers,
  nextRetryAt: l.next_retry_at,
  createdAt: l.created_at,
});

const defined = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

export const webhooksModule: GraphqlModule = {
  typeDefs: /* GraphQL */ `
    enum WebhookSubscriptionStatus { ACTIVE PAUSED DISABLED }

    ${destinationTypeDefs}

    type WebhookSubscription {
      id: ID!
      name: String!
      "A webhook's receiver; a broker destination's URL without credentials."
      targetUrl: String!
      destination: SubscriptionDestination!
      eventPatterns: [String!]!
      "Only events carrying one of these channels; null = any."
      channels: [String!]
      status: WebhookSubscriptionStatus!
      "Deliveries per second the receiver accepts; null = unthrottled."
      maxPerSecond: Int
      consecutiveFailures: Int!
      "Until when deliveries are also signed with the secret from before the last rotation."
      previousSecretExpiresAt: DateTime
      createdAt: DateTime!
      "Only on createWebhookSubscription, and only when the service generated the secret."
      secret: String
    }

    type WebhookTestResult {
      success: Boolean!
      statusCode: Int
      responseBody: String
      "Milliseconds."
      duration: Int!
      errorMessage: String
    }

    type WebhookSecretRotation {
      secret: String!
      previousSecretExpiresAt: DateTime!
    }

    type WebhookReplayResult {
      queued: Int!
      alreadyQueued: Int!
      scanned: Int!
      truncated: Boolean!
      nextSince: String
    }

    type WebhookDeliveryRetry {
      id: ID!
      status: String!
    }

    enum WebhookDeliveryStatus { pending retrying delivered failed }

    type WebhookDeliveryLog {
      id: ID!
      deliveryId: ID
      eventId: ID!
      eventType: String!
      status: WebhookDeliveryStatus!
      statusCode: Int
      attemptCount: Int!
      "Milliseconds."
      duration: Int!
      errorMessage: String
      requestBody: String!
      responseBody: String
      "The headers as sent, signature included."
      requestHeaders: JSON
      responseHeaders: JSON
      "When the next attempt is due, while the delivery is retrying."
      nextRetryAt: DateTime
      createdAt: DateTime!
    }

    type WebhookDeliveryLogEdge {
      cursor: String!
      node: WebhookDeliveryLog!
    }

    type WebhookDeliveryLogConnection {
      edges: [WebhookDeliveryLogEdge!]!
      pageInfo: PageInfo!
    }

    extend type Query {
      webhookSubscriptions: [WebhookSubscription!]!
      webhookSubscription(id: ID!): WebhookSubscription
      "Attempts, newest first. ${firstRange(MAX_FIRST)}"
      webhookDeliveryLogs(webhookSubscriptionId: ID!, first: Int = 50, after: String): WebhookDeliveryLogConnection!
    }

    extend type Mutation {
      "destination: as REST's, in its names (docs/destinations.md): {kind: rabbitmq, url, exchange, routing_key} or {kind: nats, url, subject, credentials}; absent: a webhook to targetUrl."
      createWebhookSubscription(name: String!, targetUrl: String, destination: JSON, eventPatterns: [String!]!, channels: [String!], secret: String, maxPerSecond: Int): WebhookSubscription!
      "destination: as REST's PATCH: replaces it whole; a broker destination of the current kind may leave out url to keep the stored one (credentials included)."
      updateWebhookSubscription(id: ID!, name: String, targetUrl: String, destination: JSON, eventPatterns: [String!], channels: [String!], status: WebhookSubscriptionStatus, maxPerSecond: Int): WebhookSubscription!
      deleteWebhookSubscription(id: ID!): Boolean!
      testWebhookSubscription(id: ID!): WebhookTestResult!
      rotateWebhookSecret(id: ID!): WebhookSecretRotation!
      replayWebhookSubscription(id: ID!, since: String!): WebhookReplayResult!
      retryWebhookDelivery(id: ID!): WebhookDeliveryRetry!
    }
  `,
  resolvers: {
    Query: {
      webhookSubscriptions: async (_r, _a, ctx: GqlContext) => (await listSubscriptions(ctx.deps, ctx.need('admin').appId)).map(toNode),
      webhookSubscription: async (_r, args: { id: string }, ctx: GqlContext) => {
        const r = await getSubscription(ctx.deps, ctx.need('admin').appId, args.id);
        return r.ok ? toNode(r.value) : null;
      },
      webhookDeliveryLogs: async (_r, args: { webhookSubscriptionId: string; first?: number; after?: string | null }, ctx: GqlContext) => {
        const { appId } = ctx.need('admin');
        const first = pageSize(args.first, MAX_FIRST);
        const page = unwrap(
          await listDeliveryLogs(ctx.deps, appId, args.webhookSubscriptionId, { limit: first, after: args.after ?? undefined }),
        );
        return {
          edges: page.logs.map((l) => ({ cursor: l.cursor, node: toLogNode(l) })),
          pageInfo: { hasNextPage: page.hasMore, endCursor: page.logs.at(-1)?.cursor ?? null },
        };
      },
    },
    Mutation: {
      createWebhookSubscription: async (
        _r,
        args: {
          name: string;
          targetUrl?: string | null;
          destination?: unknown;
          eventPatterns: string[];
          channels?: string[] | null;
          secret?: string | null;
          maxPerSecond?: number | null;
        },
        ctx: GqlContext,
      ) => {
        const { appId } = ctx.need('admin');
        const input = parseInput(
          createSubscriptionInput,
          defined({
            name: args.name,
            target_url: args.targetUrl ?? undefined,
            destination: args.destination ?? undefined,
            event_patterns: args.eventPatterns,
            channels: args.channels ?? undefined,
            secret: args.secret ?? undefined,
            max_per_second: args.maxPerSecond ?? undefined,
          }),
        );
        return toNode(unwrap(await createSubscription(ctx.deps, appId, input)));
      },
      updateWebhookSubscription: async (
        _r,
        args: {
          id: string;
          name?: string | null;
          targetUrl?: string | null;
          destination?: unknown;
          eventPatterns?: string[] | null;
          channels?: string[] | null;
          status?: string | null;
          maxPerSecond?: number | null;
        },
        ctx: GqlContext,
      ) => {
        const { appId } = ctx.need('admin');
        const patch = parseInput(
          updateSubscriptionInput,
          defined({
            name: args.name ?? undefined,
            target_url: args.targetUrl ?? undefined,
            destination: args.destination ?? undefined,
            event_patterns: args.eventPatterns ?? undefined,
            // An explicit null selects every channel again; leaving the argument out keeps them.
            channels: 'channels' in args ? args.channels : undefined,
            status: args.status ?? undefined,
            // An explicit null clears the throttle; leaving the argument out keeps it.
            max_per_second: 'maxPerSecond' in args ? args.maxPerSecond : undefined,
          }),
        );
        return toNode(unwrap(await updateSubscription(ctx.deps, appId, args.id, patch)));
      },
      deleteWebhookSubscription: async (_r, args: { id: string }, ctx: GqlContext) =>
        unwrap(await deleteSubscription(ctx.deps, ctx.need('admin').appId, args.id)),
      testWebhookSubscription: async (_r, args: { id: string }, ctx: GqlContext) => {
        const r = unwrap(await sendTestDelivery(ctx.deps, ctx.need('admin').appId, args.id));
        return {
          success: r.success,
          statusCode: r.status_code,
          responseBody: r.response_body,
          duration: r.duration,
          errorMessage: r.error_message,
        };
      },
      rotateWebhookSecret: async (_r, args: { id: string }, ctx: GqlContext) => {
        const r = unwrap(await rotateSecret(ctx.deps, ctx.need('admin').appId, args.id));
        return { secret: r.secret, previousSecretExpiresAt: r.previous_secret_expires_at };
      },
      replayWebhookSubscription: async (_r, args: { id: string; since: string }, ctx: GqlContext) => {
        const r = unwrap(await replaySubscription(ctx.deps, ctx.need('admin').appId, args.id, args.since));
        return {
          queued: r.queued,
          alreadyQueued: r.already_queued,
          scanned: r.scanned,
          truncated: r.truncated,
          nextSince: r.next_since ?? null,
        };
      },
      retryWebhookDelivery: async (_r, args: { id: string }, ctx: GqlContext) =>
        unwrap(await retryDelivery(ctx.deps, ctx.need('admin').appId, args.id)),
    },
  },
};

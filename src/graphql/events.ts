import { AppError, unwrap } from '../errors.js';
import { firstRange, pageSize, parseInput } from './results.js';
import { createCustomEvent, createEventInput } from '../ledger/create-event.js';
import { decodeCursor } from '../ledger/cursor.js';
import { createEventSchema, eventSchemaInput } from '../ledger/event-schemas.js';
import { channelsSchema } from '../ledger/event-scope.js';
import { findEvent, readEventPage, type EventFilters } from '../ledger/read.js';
import { toEventNode, type EventNode } from '../ledger/shape.js';
import type { GqlContext } from './context.js';
import type { GraphqlModule } from './schema.js';

const MAX_FIRST = 500;

interface EventsArgs {
  filters?: {
    eventType?: { equals?: string; startsWith?: string };
    payload?: { path: string; equals?: unknown; gt?: number; gte?: number; lt?: number; lte?: number };
    hasEdge?: { edgeType?: string; targetNodeId?: { equals?: string } };
    conversationId?: string;
    channels?: string[];
  };
  first?: number;
  after?: string;
}

export const eventsModule: GraphqlModule = {
  typeDefs: /* GraphQL */ `
    enum EdgeTargetType { PLATFORM_USER FILE }

    type PlatformUserRef {
      id: ID!
      externalId: String!
      name: String
    }

    type Edge {
      edgeType: String!
      targetNodeType: EdgeTargetType!
      targetNodeId: ID!
      targetPlatformUser: PlatformUserRef
    }

    type Event {
      id: ID!
      appId: ID!
      eventType: String!
      "Tags it was written with, to select it by."
      channels: [String!]!
      payload: JSON!
      edges: [Edge!]!
      attachments: JSON!
      createdAt: DateTime!
      originEvent: Event
      originEventId: ID
      conversationId: ID
      platformConnectionId: ID
      validationErrors: JSON
      "Opaque position in the ledger; pass it as \`after\` to resume."
      cursor: String!
    }

    type EventEdge {
      cursor: String!
      node: Event!
    }

    type PageInfo {
      hasNextPage: Boolean!
      endCursor: String
    }

    type EventConnection {
      edges: [EventEdge!]!
      pageInfo: PageInfo!
    }

    input StringFilter { equals: String, startsWith: String }
    input PayloadFilter { path: String!, equals: JSON, gt: Float, gte: Float, lt: Float, lte: Float }
    input IdEquals { equals: ID }
    input HasEdgeFilter { edgeType: String, targetNodeId: IdEquals }
    input EventFilters {
      eventType: StringFilter
      payload: PayloadFilter
      hasEdge: HasEdgeFilter
      conversationId: ID
      "Events carrying any of these channels."
      channels: [String!]
    }

    input EdgeInput {
      edgeType: String!
      targetNodeType: EdgeTargetType!
      targetNodeId: ID!
    }

    type EventSchema {
      id: ID!
      name: String!
      description: String
      jsonSchema: JSON!
      enforceValidation: Boolean!
      createdAt: DateTime!
    }

    extend type Query {
      "Events in ledger order (creation time, id), filters combined with AND. ${firstRange(MAX_FIRST)}"
      events(filters: EventFilters, first: Int = 50, after: String): EventConnection!
      event(id: ID!): Event
    }

    extend type Mutation {
      createEvent(eventType: String!, payload: JSON, edges: [EdgeInput!], originEventId: ID, channels: [String!]): Event!
      createEventSchema(name: String!, description: String, jsonSchema: JSON!, enforceValidation: Boolean = false): EventSchema!
    }
  `,
  resolvers: {
    Query: {
      events: async (_root, args: EventsArgs, ctx: GqlContext) => {
        const { appId, eventScope } = ctx.need('events:read');
        const first = pageSize(args.first, MAX_FIRST);
        const f = args.filters ?? {};
        const filters: EventFilters = {
          afterSeq: args.after !== undefined && args.after !== null ? unwrap(decodeCursor(args.after)).seq : undefined,
          eventType: f.eventType ?? undefined,
          payload: f.payload ?? undefined,
          hasEdge: f.hasEdge
            ? { edgeType: f.hasEdge.edgeType ?? undefined, targetNodeId: f.hasEdge.targetNodeId?.equals ?? undefined }
            : undefined,
          conversationId: f.conversationId ?? undefined,
          channels: f.channels ? parseInput(channelsSchema, f.channels) : undefined,
          scope: eventScope,
        };
        if (filters.payload && !/^[^.]+(\.[^.]+)*$/.test(filters.payload.path)) {
          throw new AppError('VALIDATION_ERROR', 'payload.path must be dotted field names like "order.total"', [
            { path: ['filters', 'payload', 'path'], message: 'invalid path' },
          ]);
        }
        const page = await readEventPage(ctx.deps.pools, appId, filters, first);
        return {
          edges: page.data.map(toEventNode).map((node) => ({ cursor: node.cursor, node })),
          pageInfo: { hasNextPage: page.hasMore, endCursor: page.next?.cursor ?? null },
        };
      },
      event: async (_root, args: { id: string }, ctx: GqlContext) => {
        const { appId, eventScope } = ctx.need('events:read');
        const e = await findEvent(ctx.deps.pools, appId, args.id, eventScope);
        return e ? toEventNode(e) : null;
      },
    },
    Event: {
      originEvent: async (node: EventNode, _args, ctx: GqlContext) => {
        if (!node.originEventId) return null;
        const e = await findEvent(ctx.deps.pools, ctx.principal.appId, node.originEventId, ctx.principal.eventScope);
        return e ? toEventNode(e) : null;
      },
    },
    Mutation: {
      createEvent: async (
        _root,
        args: {
          eventType: string;
          payload?: Record<string, unknown>;
          edges?: { edgeType: string; targetNodeType: string; targetNodeId: string }[];
          originEventId?: string;
          channels?: string[];
        },
        ctx: GqlContext,
      ) => {
        const { appId } = ctx.need('events:write');
        const input = parseInput(createEventInput, {
          event_type: args.eventType,
          payload: args.payload ?? {},
          edges: (args.edges ?? []).map((e) => ({
            edge_type: e.edgeType,
            target_node_type: e.targetNodeType.toLowerCase(),
            target_node_id: e.targetNodeId,
          })),
          origin_event_id: args.originEventId ?? null,
          channels: args.channels ?? [],
        });
        const outcome = unwrap(await createCustomEvent(ctx.deps, ctx.web, appId, input));
        if (!outcome.committed)
          throw new AppError('UNAVAILABLE', `Event ${outcome.id} was accepted but not yet committed; read it later by id`);
        return toEventNode(outcome.event);
      },
      createEventSchema: async (
        _root,
        args: { name: string; description?: string; jsonSchema: Record<string, unknown>; enforceValidation?: boolean },
        ctx: GqlContext,
      ) => {
        const { appId } = ctx.need('admin');
        const input = parseInput(eventSchemaInput, {
          name: args.name,
          description: args.description ?? null,
          json_schema: args.jsonSchema,
          enforce_validation: args.enforceValidation ?? false,
        });
        const s = unwrap(await createEventSchema(ctx.deps.sql, appId, input));
        return {
          id: s.id,
          name: s.name,
          description: s.description,
          jsonSchema: s.json_schema,
          enforceValidation: s.enforce_validation,
          createdAt: s.created_at,
        };
      },
    },
  },
};

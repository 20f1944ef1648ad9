import {
  getConversation,
  listConversations,
  listConversationsInput,
  PAGE_KIND_CONVERSATIONS,
  participantsOf,
  type ConversationView,
  type ParticipantView,
} from '../conversations/conversations.js';
import { getEvent } from '../ledger/read.js';
import { toEventNode } from '../ledger/shape.js';
import { REPLY_POLICIES } from '../platforms/types.js';
import { encodePageCursor } from '../pagination/page-cursor.js';
import type { GqlContext } from './context.js';
import type { GraphqlModule } from './schema.js';
import { firstRange, must, pageSize, parseInput } from './results.js';

const MAX_FIRST = 200;

export const toConversationNode = (c: ConversationView) => ({
  id: c.id,
  platformConnectionId: c.platform_connection_id,
  platform: c.platform.toUpperCase(),
  externalId: c.external_id,
  threadId: c.thread_id,
  name: c.name,
  createdAt: c.created_at,
  lastEventId: c.last_event_id,
  lastEventAt: c.last_event_at,
  replyWindow: {
    policy: c.reply_window.policy.toUpperCase(),
    open: c.reply_window.open,
    lastInboundAt: c.reply_window.last_inbound_at,
    closesAt: c.reply_window.closes_at,
  },
  cursor: encodePageCursor(PAGE_KIND_CONVERSATIONS, { at: c.created_at, id: c.id }),
  /** Set when the detail read already loaded them. */
  preloadedParticipants: undefined as ParticipantView[] | undefined,
});
type ConversationNode = ReturnType<typeof toConversationNode>;

const toParticipantNode = (p: ParticipantView) => ({
  platformUserId: p.platform_user_id,
  userId: p.user_id,
  platform: p.platform.toUpperCase(),
  externalId: p.external_id,
  name: p.name,
  isSystemUser: p.is_system_user,
  firstSeenAt: p.first_seen_at,
  lastSeenAt: p.last_seen_at,
});

export const conversationsModule: GraphqlModule = {
  typeDefs: /* GraphQL */ `
    enum ReplyWindowPolicy { ${REPLY_POLICIES.map((p) => p.toUpperCase()).join(' ')} }

    "Whether the connected account may message the conversation now, by the platform's rule."
    type ReplyWindow {
      policy: ReplyWindowPolicy!
      "Null when unknown (a Telegram private chat we never heard from)."
      open: Boolean
      lastInboundAt: DateTime
      closesAt: DateTime
    }

    type ConversationParticipant {
      platformUserId: ID!
      "The user the platform user belongs to now."
      userId: ID!
      platform: PlatformName!
      externalId: String!
      name: String
      isSystemUser: Boolean!
      firstSeenAt: DateTime!
      lastSeenAt: DateTime!
    }

    type Conversation {
      id: ID!
      platformConnectionId: ID!
      platform: PlatformName!
      externalId: String!
      threadId: String
      name: String
      createdAt: DateTime!
      lastEventAt: DateTime
      participants: [ConversationParticipant!]!
      lastEvent: Event
      replyWindow: ReplyWindow!
    }

    type ConversationEdge { cursor: String! node: Conversation! }
    type ConversationConnection { edges: [ConversationEdge!]! pageInfo: PageInfo! }

    input ConversationFilters {
      platformConnectionId: ID
      "Conversations any platform user of this user took part in (a merged-away id: its survivor's)."
      userId: ID
    }

    extend type Query {
      "Conversations, filters combined with AND. ${firstRange(MAX_FIRST)}"
      conversations(filters: ConversationFilters, first: Int = 50, after: String): ConversationConnection!
      conversation(id: ID!): Conversation
    }
  `,
  resolvers: {
    Query: {
      conversations: async (
        _r,
        a: { filters?: { platformConnectionId?: string; userId?: string }; first?: number; after?: string },
        ctx: GqlContext,
      ) => {
        const { appId } = ctx.need('events:read');
        const first = pageSize(a.first, MAX_FIRST);
        const input = parseInput(listConversationsInput, {
          ...(a.filters?.platformConnectionId ? { platform_connection_id: a.filters.platformConnectionId } : {}),
          ...(a.filters?.userId ? { user_id: a.filters.userId } : {}),
          limit: first,
          ...(a.after ? { after: a.after } : {}),
        });
        const page = must(await listConversations(ctx.deps.sql, appId, input));
        const nodes = page.conversations.map(toConversationNode);
        return {
          edges: nodes.map((node) => ({ cursor: node.cursor, node })),
          pageInfo: { hasNextPage: page.hasMore, endCursor: page.nextCursor },
        };
      },
      conversation: async (_r, a: { id: string }, ctx: GqlContext) => {
        const { appId } = ctx.need('events:read');
        const r = await getConversation(ctx.deps.sql, appId, a.id);
        if (!r.ok) return null;
        return { ...toConversationNode(r.value), preloadedParticipants: r.value.participants };
      },
    },
    Conversation: {
      participants: async (c: ConversationNode, _a, ctx: GqlContext) => {
        const list = c.preloadedParticipants ?? (await participantsOf(ctx.deps.sql, ctx.principal.appId, c.id));
        return list.map(toParticipantNode);
      },
      lastEvent: async (c: ConversationNode, _a, ctx: GqlContext) => {
        if (!c.lastEventId) return null;
        // Event contents need events:read (User.conversations only needs users:read).
        ctx.need('events:read');
        const e = await getEvent(ctx.deps.sql, ctx.principal.appId, c.lastEventId);
        return e ? toEventNode(e) : null;
      },
    },
  },
};

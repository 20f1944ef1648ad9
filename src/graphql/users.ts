import { listConversations } from '../conversations/conversations.js';
import { activateLinkCode, createLinkCode, createLinkCodeInput } from '../identity/link-codes.js';
import { mergeUsers } from '../identity/merge.js';
import {
  getUser,
  listUsers,
  listUsersInput,
  PAGE_KIND_USERS,
  resolveUserId,
  updateUser,
  updateUserInput,
  type PlatformUserView,
  type UserView,
} from '../identity/users.js';
import { decodeCursor } from '../ledger/cursor.js';
import { encodePageCursor } from '../pagination/page-cursor.js';
import { listEvents } from '../ledger/read.js';
import { toEventNode } from '../ledger/shape.js';
import type { GqlContext } from './context.js';
import { firstRange, must, pageSize, parseInput } from './results.js';
import { toConversationNode } from './conversations.js';
import type { GraphqlModule } from './schema.js';

const MAX_FIRST = 200;
/** A user's events page like the events query's. */
const MAX_EVENTS_FIRST = 500;

const toPlatformUserNode = (p: PlatformUserView) => ({
  id: p.id,
  userId: p.user_id,
  platform: p.platform.toUpperCase(),
  externalId: p.external_id,
  name: p.name,
  platformConnectionId: p.platform_connection_id,
  isSystemUser: p.is_system_user,
  createdAt: p.created_at,
});

const toUserNode = (u: UserView) => ({
  id: u.id,
  name: u.name,
  metadata: u.metadata,
  isSystem: u.is_system,
  createdAt: u.created_at,
  updatedAt: u.updated_at,
  platformUsers: u.platform_users.map(toPlatformUserNode),
});
type UserNode = ReturnType<typeof toUserNode>;

const definedOnly = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== null));

export const usersModule: GraphqlModule = {
  typeDefs: /* GraphQL */ `
    type PlatformUser {
      id: ID!
      userId: ID!
      platform: PlatformName!
      externalId: String!
      name: String
      platformConnectionId: ID
      isSystemUser: Boolean!
      createdAt: DateTime!
    }

    type User {
      id: ID!
      name: String
      metadata: JSON!
      "The user standing for a connected account itself (bot, page, number)."
      isSystem: Boolean!
      createdAt: DateTime!
      updatedAt: DateTime!
      platformUsers: [PlatformUser!]!
      "Conversations any of the user's platform users took part in. ${firstRange(MAX_FIRST, 'field')}"
      conversations(first: Int = 50, after: String): ConversationConnection!
      "Events involving any of the user's platform users, in ledger order (needs events:read). ${firstRange(MAX_EVENTS_FIRST, 'field')}"
      events(first: Int = 50, after: String, eventType: StringFilter): EventConnection!
    }

    type UserEdge { cursor: String! node: User! }
    type UserConnection { edges: [UserEdge!]! pageInfo: PageInfo! }

    input UserFilters {
      platform: PlatformName
      externalId: String
      platformConnectionId: ID
      "Case-insensitive substring of the user's or one of its platform users' names."
      nameContains: String
      includeSystem: Boolean = false
    }

    type UserMerge {
      "The surviving user."
      user: User!
      targetUserId: ID!
      sourceUserId: ID!
      platformUserIds: [ID!]!
      eventId: ID!
      "True when this merge had already been done."
      replayed: Boolean!
    }

    type DeepLink { platform: String! platformConnectionId: ID! url: String! }
    type LinkCode {
      id: ID!
      code: String!
      userId: ID!
      expiresAt: DateTime!
      deepLinks: [DeepLink!]!
      createdAt: DateTime!
    }
    type LinkCodeActivation {
      linkCodeId: ID!
      userId: ID!
      platformUserId: ID!
      mergedUserId: ID
      replayed: Boolean!
    }

    extend type Query {
      "Live users, oldest first; filters combine with AND. ${firstRange(MAX_FIRST)}"
      users(filters: UserFilters, first: Int = 50, after: String): UserConnection!
      "Null for an unknown id; a merged-away id fails with USER_MERGED (extensions.details[0].merged_into)."
      user(id: ID!): User
    }

    extend type Mutation {
      "Rename (null clears the name) and/or patch metadata (top-level merge: a null value deletes its key)."
      updateUser(id: ID!, name: String, metadata: JSON): User!
      "Moves the source's platform users to the target; the source is gone afterwards. Records user.merged."
      mergeUsers(targetUserId: ID!, sourceUserId: ID!): UserMerge!
      createLinkCode(userId: ID!, ttlSeconds: Int): LinkCode!
      activateLinkCode(code: String!, platformUserId: ID!): LinkCodeActivation!
    }
  `,
  resolvers: {
    Query: {
      users: async (_r, a: { filters?: Record<string, unknown>; first?: number; after?: string }, ctx: GqlContext) => {
        const { appId } = ctx.need('users:read');
        const f = a.filters ?? {};
        const input = parseInput(
          listUsersInput,
          definedOnly({
            platform: f.platform,
            external_id: f.externalId,
            platform_connection_id: f.platformConnectionId,
            name_contains: f.nameContains,
            include_system: f.includeSystem ?? false,
            limit: pageSize(a.first, MAX_FIRST),
            after: a.after,
          }),
        );
        const page = must(await listUsers(ctx.deps.sql, appId, input));
        const nodes = page.users.map(toUserNode);
        return {
          edges: nodes.map((node) => ({ cursor: encodePageCursor(PAGE_KIND_USERS, { at: node.createdAt, id: node.id }), node })),
          pageInfo: { hasNextPage: page.hasMore, endCursor: page.nextCursor },
        };
      },
      user: async (_r, a: { id: string }, ctx: GqlContext) => {
        const { appId } = ctx.need('users:read');
        const r = await getUser(ctx.deps.sql, appId, a.id);
        if (!r.ok && r.error.code === 'NOT_FOUND') return null;
        return toUserNode(must(r));
      },
    },
    User: {
      conversations: async (u: UserNode, a: { first?: number; after?: string }, ctx: GqlContext) => {
        const { appId } = ctx.need('users:read');
        const page = must(await listConversations(ctx.deps.sql, appId, parseInputConversations(u.id, a)));
        const nodes = page.conversations.map(toConversationNode);
        return {
          edges: nodes.map((node) => ({ cursor: node.cursor, node })),
          pageInfo: { hasNextPage: page.hasMore, endCursor: page.nextCursor },
        };
      },
      events: async (
        u: UserNode,
        a: { first?: number; after?: string; eventType?: { equals?: string; startsWith?: string } },
        ctx: GqlContext,
      ) => {
        const { appId } = ctx.need('events:read');
        const first = pageSize(a.first, MAX_EVENTS_FIRST);
        const userId = (await resolveUserId(ctx.deps.sql, appId, u.id)) ?? u.id;
        const afterSeq = a.after ? must(decodeCursor(a.after)).seq : undefined;
        const rows = await listEvents(ctx.deps.sql, appId, { afterSeq, userId, eventType: a.eventType ?? undefined }, first + 1);
        const page = rows.slice(0, first).map(toEventNode);
        return {
          edges: page.map((node) => ({ cursor: node.cursor, node })),
          pageInfo: { hasNextPage: rows.length > first, endCursor: page.at(-1)?.cursor ?? null },
        };
      },
    },
    Mutation: {
      updateUser: async (_r, a: { id: string; name?: string | null; metadata?: unknown }, ctx: GqlContext) => {
        const { appId } = ctx.need('users:write');
        const patch = parseInput(updateUserInput, {
          ...('name' in a ? { name: a.name } : {}),
          ...(a.metadata !== undefined && a.metadata !== null ? { metadata: a.metadata } : {}),
        });
        return toUserNode(must(await updateUser(ctx.deps.sql, appId, a.id, patch)));
      },
      mergeUsers: async (_r, a: { targetUserId: string; sourceUserId: string }, ctx: GqlContext) => {
        const { appId } = ctx.need('users:write');
        const m = must(await mergeUsers(ctx.deps, appId, { targetUserId: a.targetUserId, sourceUserId: a.sourceUserId }));
        return {
          user: toUserNode(m.user),
          targetUserId: m.targetUserId,
          sourceUserId: m.sourceUserId,
          platformUserIds: m.platformUserIds,
          eventId: m.eventId,
          replayed: m.replayed,
        };
      },
      createLinkCode: async (_r, a: { userId: string; ttlSeconds?: number | null }, ctx: GqlContext) => {
        const { appId } = ctx.need('users:write');
        const input = parseInput(createLinkCodeInput, definedOnly({ user_id: a.userId, ttl_seconds: a.ttlSeconds }));
        const c = must(await createLinkCode(ctx.deps, appId, input));
        return {
          id: c.id,
          code: c.code,
          userId: c.user_id,
          expiresAt: c.expires_at,
          createdAt: c.created_at,
          deepLinks: c.deep_links.map((l) => ({ platform: l.platform, platformConnectionId: l.platform_connection_id, url: l.url })),
        };
      },
      activateLinkCode: async (_r, a: { code: string; platformUserId: string }, ctx: GqlContext) => {
        const { appId } = ctx.need('users:write');
        const r = must(
          await activateLinkCode(ctx.deps, ctx.web.linkCodes, appId, { code: a.code, platformUserId: a.platformUserId, via: 'api' }),
        );
        return {
          linkCodeId: r.link_code_id,
          userId: r.user_id,
          platformUserId: r.platform_user_id,
          mergedUserId: r.merged_user_id,
          replayed: r.replayed,
        };
      },
    },
  },
};

function parseInputConversations(userId: string, a: { first?: number; after?: string }) {
  return { user_id: userId, limit: pageSize(a.first, MAX_FIRST), ...(a.after ? { after: a.after } : {}) };
}

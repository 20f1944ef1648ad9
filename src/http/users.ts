import { z } from 'zod';
import { listConversations } from '../conversations/conversations.js';
import { mergeUsers } from '../identity/merge.js';
import {
  failureToAppError,
  getUser,
  listUsers,
  listUsersInput,
  resolveUserId,
  unwrapIdentity,
  updateUser,
  updateUserInput,
  userNotFound,
} from '../identity/users.js';
import { decodeCursor } from '../ledger/cursor.js';
import { listEvents, readThrough } from '../ledger/read.js';
import { toRestEvent } from '../ledger/shape.js';
import type { Api } from './api.js';
import { eventTypeFilter, restEventSchema } from './events.js';
import { conversationOut } from './conversations.js';

const platformUserOut = z.object({
  id: z.string(),
  user_id: z.string(),
  platform: z.string(),
  external_id: z.string(),
  name: z.string().nullable(),
  platform_connection_id: z.string().nullable(),
  is_system_user: z.boolean(),
  created_at: z.string(),
});
const userOut = z.object({
  id: z.string(),
  name: z.string().nullable(),
  metadata: z.record(z.string(), z.unknown()),
  is_system: z.boolean(),
  created_at: z.string(),
  updated_at: z.string(),
  platform_users: z.array(platformUserOut),
});
const userDetailOut = userOut.extend({
  conversations: z.array(conversationOut),
  conversations_next_cursor: z.string().nullable(),
});
const idParams = z.object({ id: z.string().max(100) });
const MERGED = { 410: { description: 'USER_MERGED: the user was merged away; details[0].merged_into (and Location) name the survivor' } };

const eventsQuery = z.strictObject({
  after: z.string().optional(),
  limit: z.coerce.number().int().min(1).max(500).default(50),
  event_type: z
    .string()
    .max(200)
    .regex(/^[a-z0-9_.]+\*?$/, 'an event type, or a prefix ending in *')
    .optional(),
});

export function registerUserRoutes(api: Api): void {
  api.route({
    method: 'get',
    path: '/v1/users',
    operationId: 'listUsers',
    description:
      "The application's users, oldest first, filtered by platform, external id, connection or name. A user groups the platform users (accounts on chat platforms) that are the same person.",
    summary: 'List users (filters: platform, external_id, platform_connection_id, name_contains), oldest first',
    scope: 'users:read',
    query: listUsersInput,
    responses: {
      200: {
        description: 'A page of users with their platform users',
        schema: z.object({ data: z.array(userOut), next_cursor: z.string().nullable(), has_more: z.boolean() }),
      },
    },
    errors: ['INVALID_CURSOR'],
    async handler({ deps, principal, query }) {
      const page = unwrapIdentity(await listUsers(deps.sql, principal.appId, query));
      return { status: 200, body: { data: page.users, next_cursor: page.nextCursor, has_more: page.hasMore } };
    },
  });

  api.route({
    method: 'get',
    path: '/v1/users/:id',
    operationId: 'getUser',
    description:
      "One user with its platform users and the first page of its conversations. A merged-away user's id answers with the user it was merged into.",
    summary: 'One user with its platform users and (the first page of) its conversations',
    scope: 'users:read',
    params: idParams,
    responses: { 200: { description: 'The user', schema: userDetailOut }, ...MERGED },
    errors: ['NOT_FOUND', 'USER_MERGED'],
    async handler({ deps, principal, params }) {
      const user = unwrapIdentity(await getUser(deps.sql, principal.appId, params.id));
      const convs = unwrapIdentity(await listConversations(deps.sql, principal.appId, { user_id: user.id, limit: 50 }));
      return { status: 200, body: { ...user, conversations: convs.conversations, conversations_next_cursor: convs.nextCursor } };
    },
  });

  api.route({
    method: 'patch',
    path: '/v1/users/:id',
    operationId: 'updateUser',
    description:
      'Renames a user and/or patches its metadata: top-level keys in the body replace those stored, and a key set to null is deleted.',
    summary: 'Rename a user and/or patch its metadata (top-level merge patch: null deletes a key)',
    scope: 'users:write',
    params: idParams,
    body: updateUserInput,
    responses: { 200: { description: 'The updated user', schema: userOut }, ...MERGED },
    errors: ['NOT_FOUND', 'USER_MERGED'],
    handler: async ({ deps, principal, params, body }) => ({
      status: 200,
      body: unwrapIdentity(await updateUser(deps.sql, principal.appId, params.id, body)),
    }),
  });

  api.route({
    method: 'post',
    path: '/v1/users/:id/merge',
    operationId: 'mergeUsers',
    description:
      "Moves every platform user of `source_user_id` to this user and removes the source: for when two users turn out to be one person. Records `user.merged`; the source's id resolves to this user afterwards.",
    summary: 'Merge source_user_id into this user: its platform users move here, it is gone afterwards; records user.merged',
    scope: 'users:write',
    params: idParams,
    body: z.strictObject({ source_user_id: z.string().min(1).max(100) }),
    responses: {
      200: {
        description: 'The surviving user, and what moved (replayed: true when this merge had already been done)',
        schema: z.object({
          user: userOut,
          merge: z.object({
            source_user_id: z.string(),
            target_user_id: z.string(),
            platform_user_ids: z.array(z.string()),
            event_id: z.string(),
            replayed: z.boolean(),
          }),
        }),
      },
      ...MERGED,
    },
    errors: ['NOT_FOUND', 'USER_MERGED', 'CONFLICT'],
    async handler({ deps, principal, params, body }) {
      const m = unwrapIdentity(await mergeUsers(deps, principal.appId, { targetUserId: params.id, sourceUserId: body.source_user_id }));
      return {
        status: 200,
        body: {
          user: m.user,
          merge: {
            source_user_id: m.sourceUserId,
            target_user_id: m.targetUserId,
            platform_user_ids: m.platformUserIds,
            event_id: m.eventId,
            replayed: m.replayed,
          },
        },
      };
    },
  });

  api.route({
    method: 'get',
    path: '/v1/users/:id/events',
    operationId: 'listUserEvents',
    description: "The ledger's events involving any of the user's platform users, in cursor order (same paging as GET /v1/events).",
    summary: "Events involving any of the user's platform users, in ledger order (a merged-away id lists its survivor's)",
    scope: 'events:read',
    params: idParams,
    query: eventsQuery,
    responses: {
      200: {
        description: 'A page of events',
        schema: z.object({ data: z.array(restEventSchema), next_cursor: z.string().optional(), has_more: z.boolean() }),
      },
    },
    errors: ['NOT_FOUND', 'INVALID_CURSOR'],
    async handler({ deps, principal, params, query }) {
      const userId = await resolveUserId(deps.sql, principal.appId, params.id);
      if (!userId) throw failureToAppError(userNotFound(params.id));
      const afterSeq = query.after !== undefined ? unwrapIdentity(decodeCursor(query.after)).seq : undefined;
      // A page after a cursor the replica has not replayed yet is read on the primary (the ledger's rule).
      const rows = await readThrough(deps.pools, principal.appId, afterSeq ?? 0, 0, (sql) =>
        listEvents(sql, principal.appId, { afterSeq, userId, eventType: eventTypeFilter(query.event_type) }, query.limit + 1),
      );
      const page = rows.slice(0, query.limit);
      const last = page.at(-1);
      return {
        status: 200,
        body: { data: page.map(toRestEvent), ...(last ? { next_cursor: last.cursor } : {}), has_more: rows.length > query.limit },
      };
    },
  });
}

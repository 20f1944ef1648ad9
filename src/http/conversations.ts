import { z } from 'zod';
import { getConversation, listConversations, listConversationsInput } from '../conversations/conversations.js';
import { toRestEvent } from '../ledger/shape.js';
import type { Api } from './api.js';
import { restEventSchema } from './events.js';
import { unwrapIdentity } from '../identity/users.js';
import { REPLY_POLICIES } from '../platforms/types.js';

export const conversationOut = z.object({
  id: z.string(),
  platform_connection_id: z.string(),
  platform: z.string(),
  external_id: z.string(),
  thread_id: z.string().nullable(),
  name: z.string().nullable(),
  created_at: z.string(),
  last_event_id: z.string().nullable(),
  last_event_at: z.string().nullable(),
  reply_window: z.object({
    policy: z.enum(REPLY_POLICIES),
    open: z.boolean().nullable(),
    last_inbound_at: z.string().nullable(),
    closes_at: z.string().nullable(),
  }),
});
const participantOut = z.object({
  platform_user_id: z.string(),
  user_id: z.string(),
  platform: z.string(),
  external_id: z.string(),
  name: z.string().nullable(),
  is_system_user: z.boolean(),
  first_seen_at: z.string(),
  last_seen_at: z.string(),
});

export function registerConversationRoutes(api: Api): void {
  api.route({
    method: 'get',
    path: '/v1/conversations',
    operationId: 'listConversations',
    description: "The application's conversations (one per platform connection and chat), oldest first, filtered by connection or user.",
    summary: 'List conversations (filters: platform_connection_id, user_id), oldest first',
    scope: 'events:read',
    query: listConversationsInput,
    responses: {
      200: {
        description: 'A page of conversations',
        schema: z.object({ data: z.array(conversationOut), next_cursor: z.string().nullable(), has_more: z.boolean() }),
      },
    },
    errors: ['INVALID_CURSOR'],
    async handler({ deps, principal, query }) {
      const page = unwrapIdentity(await listConversations(deps.sql, principal.appId, query));
      return { status: 200, body: { data: page.conversations, next_cursor: page.nextCursor, has_more: page.hasMore } };
    },
  });

  api.route({
    method: 'get',
    path: '/v1/conversations/:id',
    operationId: 'getConversation',
    description:
      "One conversation with its participants, its last event and whether the platform's reply window is open (some platforms only allow replies for a time after the user last wrote).",
    summary: 'One conversation with its participants, last event and reply-window state',
    scope: 'events:read',
    params: z.object({ id: z.string().max(100) }),
    responses: {
      200: {
        description: 'The conversation',
        schema: conversationOut.extend({ participants: z.array(participantOut), last_event: restEventSchema.nullable() }),
      },
    },
    errors: ['NOT_FOUND'],
    async handler({ deps, principal, params }) {
      const c = unwrapIdentity(await getConversation(deps.sql, principal.appId, params.id));
      return { status: 200, body: { ...c, last_event: c.last_event ? toRestEvent(c.last_event) : null } };
    },
  });
}

import { z } from 'zod';
import { unwrap } from '../errors.js';
import { createCustomEvent, createEventInput } from '../ledger/create-event.js';
import { decodeCursor } from '../ledger/cursor.js';
import { channelSchema } from '../ledger/event-scope.js';
import { findEvent, readEventPage } from '../ledger/read.js';
import { toRestEvent } from '../ledger/shape.js';
import { AppError } from '../errors.js';
import type { Api } from './api.js';
import { IDEMPOTENCY_KEY } from './openapi.js';
import type { RouteContext } from './routes.js';

const edgeOut = z.object({ edge_type: z.string(), target_node_type: z.enum(['platform_user', 'file']), target_node_id: z.string() });
export const restEventSchema = z.object({
  id: z.string(),
  app_id: z.string(),
  event_type: z.string(),
  channels: z.array(z.string()),
  payload: z.record(z.string(), z.unknown()),
  edges: z.array(edgeOut),
  attachments: z.array(z.unknown()),
  origin_event_id: z.string().nullable(),
  conversation_id: z.string().nullable(),
  platform_connection_id: z.string().nullable(),
  validation_errors: z.array(z.unknown()).optional(),
  created_at: z.string(),
  cursor: z.string(),
});

const listQuery = z.strictObject({
  after: z.string().optional().describe('only events after this cursor'),
  before: z.string().optional().describe('only events before this cursor'),
  order: z.enum(['asc', 'desc']).default('asc').describe('desc: newest first, paging back with next_cursor as `before`'),
  limit: z.coerce.number().int().min(1).max(500).default(50),
  event_type: z
    .string()
    .max(200)
    .regex(/^[a-z0-9_.]+\*?$/, 'an event type, or a prefix ending in *')
    .optional(),
  conversation_id: z.string().max(100).optional(),
  user_id: z.string().max(100).optional().describe('events with an edge to this user or platform user (merges followed)'),
  channel: z
    .string()
    .max(1400)
    .transform((v, ctx) => {
      const list = v.split(',').map((c) => c.trim());
      const parsed = z.array(channelSchema).min(1).max(20).safeParse(list);
      if (parsed.success) return parsed.data;
      for (const issue of parsed.error.issues) ctx.addIssue({ code: 'custom', message: issue.message });
      return z.NEVER;
    })
    .optional()
    .describe('events on any of these channels (comma-separated, at most 20)'),
});

/** Filters of GET /v1/events as the ledger's read filters. */
export function eventTypeFilter(eventType: string | undefined) {
  if (!eventType) return undefined;
  return eventType.endsWith('*') ? { startsWith: eventType.slice(0, -1) } : { equals: eventType };
}

export function registerEventRoutes(api: Api, { web }: RouteContext): void {
  api.route({
    method: 'post',
    path: '/v1/events',
    operationId: 'createEvent',
    description:
      "Appends an event of your own type to the application's ledger. When a JSON Schema is defined for the type (event schemas), the payload must satisfy it or the request is refused with 400. The answer is 201 with the stored event once the ledger has committed it, or 202 when the commit takes longer than the request may wait; either way the event is durable. Send an Idempotency-Key to make retries safe.",
    summary: 'Record a custom event (answers once the ledger has committed it)',
    scope: 'events:write',
    body: createEventInput,
    headers: [IDEMPOTENCY_KEY],
    responses: {
      201: { description: 'The stored event', schema: restEventSchema },
      202: {
        description: 'Accepted; not yet committed within the wait bound',
        schema: z.object({ id: z.string(), status: z.literal('queued') }),
      },
    },
    errors: ['RESERVED_EVENT_TYPE', 'IDEMPOTENCY_CONFLICT'],
    async handler({ deps, principal, body, req }) {
      const outcome = unwrap(await createCustomEvent(deps, web, principal.appId, body, req.get('idempotency-key')));
      return outcome.committed
        ? { status: 201, body: toRestEvent(outcome.event) }
        : { status: 202, body: { id: outcome.id, status: 'queued' } };
    },
  });

  api.route({
    method: 'get',
    path: '/v1/events',
    operationId: 'listEvents',
    description:
      "Reads the ledger oldest first by cursor: pass the last page's cursor to get what came after it, so no event is skipped or seen twice. Filter by event type pattern (`order.*`), user or conversation. The same cursors resume the SSE stream and the GraphQL subscription.",
    summary: 'Page through the ledger in cursor order',
    scope: 'events:read',
    query: listQuery,
    responses: {
      200: {
        description:
          'A page (in a scoped portal session, only its events: a page may come back short, keep following next_cursor); keep polling from next_cursor (as `after`) to see new events exactly once, or with order=desc page back (next_cursor as `before`)',
        schema: z.object({ data: z.array(restEventSchema), next_cursor: z.string().optional(), has_more: z.boolean() }),
      },
    },
    errors: ['INVALID_CURSOR'],
    async handler({ deps, principal, query }) {
      const seqOf = (cursor: string | undefined) => (cursor !== undefined ? unwrap(decodeCursor(cursor)).seq : undefined);
      const filters = {
        afterSeq: seqOf(query.after),
        beforeSeq: seqOf(query.before),
        descending: query.order === 'desc',
        eventType: eventTypeFilter(query.event_type),
        conversationId: query.conversation_id,
        userId: query.user_id,
        channels: query.channel,
        scope: principal.eventScope,
      };
      const page = await readEventPage(deps.pools, principal.appId, filters, query.limit);
      return {
        status: 200,
        body: { data: page.data.map(toRestEvent), ...(page.next ? { next_cursor: page.next.cursor } : {}), has_more: page.hasMore },
      };
    },
  });

  api.route({
    method: 'get',
    path: '/v1/events/:id',
    operationId: 'getEvent',
    description: 'One event of the ledger by id, with its payload and edges (the platform users, files and other records it involves).',
    summary: 'One event',
    scope: 'events:read',
    params: z.object({ id: z.string() }),
    responses: { 200: { description: 'The event', schema: restEventSchema } },
    errors: ['NOT_FOUND'],
    async handler({ deps, principal, params }) {
      const event = await findEvent(deps.pools, principal.appId, params.id, principal.eventScope);
      if (!event) throw new AppError('NOT_FOUND', `No event ${params.id}`);
      return { status: 200, body: toRestEvent(event) };
    },
  });
}

import { z } from 'zod';
import { unwrap } from '../errors.js';
import {
  createEventSchema,
  deleteEventSchema,
  eventSchemaInput,
  eventSchemaPatch,
  getEventSchema,
  listEventSchemas,
  updateEventSchema,
  type EventSchemaRecord,
} from '../ledger/event-schemas.js';
import type { Api } from './api.js';

const out = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  json_schema: z.record(z.string(), z.unknown()),
  enforce_validation: z.boolean(),
  created_at: z.string(),
  updated_at: z.string(),
});
const toRest = (s: EventSchemaRecord) => ({ ...s, created_at: s.created_at.toISOString(), updated_at: s.updated_at.toISOString() });
const idParams = z.object({ id: z.string() });

export function registerEventSchemaRoutes(api: Api): void {
  api.route({
    method: 'post',
    path: '/v1/event-schemas',
    operationId: 'createEventSchema',
    description:
      'Gives a custom event type a JSON Schema: from then on, POST /v1/events with that type is checked against it. Events recorded before are not re-checked.',
    summary: 'Define the JSON Schema of a custom event type',
    scope: 'admin',
    body: eventSchemaInput,
    responses: { 201: { description: 'Created', schema: out } },
    errors: ['CONFLICT'],
    handler: async ({ deps, principal, body }) => ({
      status: 201,
      body: toRest(unwrap(await createEventSchema(deps.sql, principal.appId, body))),
    }),
  });
  api.route({
    method: 'get',
    path: '/v1/event-schemas',
    operationId: 'listEventSchemas',
    description: "The application's event schemas, one per custom event type.",
    summary: 'List event schemas',
    scope: 'admin',
    responses: { 200: { description: 'All schemas', schema: z.object({ data: z.array(out) }) } },
    handler: async ({ deps, principal }) => ({
      status: 200,
      body: { data: (await listEventSchemas(deps.sql, principal.appId)).map(toRest) },
    }),
  });
  api.route({
    method: 'get',
    path: '/v1/event-schemas/:id',
    operationId: 'getEventSchema',
    description: 'One event schema by id, with the JSON Schema it enforces.',
    summary: 'One event schema',
    scope: 'admin',
    params: idParams,
    responses: { 200: { description: 'The schema', schema: out } },
    errors: ['NOT_FOUND'],
    handler: async ({ deps, principal, params }) => ({
      status: 200,
      body: toRest(unwrap(await getEventSchema(deps.sql, principal.appId, params.id))),
    }),
  });
  api.route({
    method: 'patch',
    path: '/v1/event-schemas/:id',
    operationId: 'updateEventSchema',
    description:
      'Replaces the JSON Schema of an event type (or its description); events recorded afterwards are checked against the new one.',
    summary: 'Update an event schema',
    scope: 'admin',
    params: idParams,
    body: eventSchemaPatch,
    responses: { 200: { description: 'The updated schema', schema: out } },
    errors: ['NOT_FOUND', 'CONFLICT'],
    handler: async ({ deps, principal, params, body }) => ({
      status: 200,
      body: toRest(unwrap(await updateEventSchema(deps.sql, principal.appId, params.id, body))),
    }),
  });
  api.route({
    method: 'delete',
    path: '/v1/event-schemas/:id',
    operationId: 'deleteEventSchema',
    description: 'Removes an event schema: events of its type are accepted unchecked afterwards. Recorded events stay.',
    summary: 'Delete an event schema',
    scope: 'admin',
    params: idParams,
    responses: { 204: { description: 'Deleted' } },
    errors: ['NOT_FOUND'],
    handler: async ({ deps, principal, params }) => {
      unwrap(await deleteEventSchema(deps.sql, principal.appId, params.id));
      return { status: 204 };
    },
  });
}

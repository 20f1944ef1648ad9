import { z } from 'zod';
import { unwrap } from '../errors.js';
import {
  createConnection,
  createConnectionInput,
  deleteConnection,
  getConnection,
  listConnections,
  updateConnection,
  updateConnectionInput,
} from '../connections/connections.js';
import { PLATFORM_NAMES } from '../platforms/types.js';
import type { Api } from './api.js';

const connectionOut = z.object({
  id: z.string(),
  name: z.string(),
  platform_name: z.enum(PLATFORM_NAMES),
  config: z.record(z.string(), z.unknown()),
  webhook_url: z.string(),
  status: z.enum(['ACTIVE', 'DISABLED']),
  health: z.object({
    status: z.enum(['green', 'red', 'unknown']),
    last_success_at: z.string().nullable(),
    last_error_at: z.string().nullable(),
    last_error: z.string().nullable(),
    last_inbound_at: z.string().nullable().describe('when the platform last delivered something to this connection'),
    consecutive_failures: z.number(),
  }),
  created_at: z.string(),
  updated_at: z.string(),
});
const idParams = z.object({ id: z.string() });

export function registerConnectionRoutes(api: Api): void {
  api.route({
    method: 'post',
    path: '/v1/platform-connections',
    operationId: 'createPlatformConnection',
    summary: 'Connect an account on a chat platform (secrets are encrypted and never returned)',
    scope: 'admin',
    body: createConnectionInput,
    responses: { 201: { description: 'The connection, with its inbound webhook URL', schema: connectionOut } },
    errors: ['PLATFORM_CONNECTION_CONFLICT'],
    handler: async ({ deps, principal, body }) => ({ status: 201, body: unwrap(await createConnection(deps, principal.appId, body)) }),
  });
  api.route({
    method: 'get',
    path: '/v1/platform-connections',
    operationId: 'listPlatformConnections',
    summary: 'List platform connections',
    scope: 'admin',
    responses: { 200: { description: 'All connections', schema: z.object({ data: z.array(connectionOut) }) } },
    handler: async ({ deps, principal }) => ({ status: 200, body: { data: await listConnections(deps, principal.appId) } }),
  });
  api.route({
    method: 'get',
    path: '/v1/platform-connections/:id',
    operationId: 'getPlatformConnection',
    summary: 'One platform connection',
    scope: 'admin',
    params: idParams,
    responses: { 200: { description: 'The connection', schema: connectionOut } },
    errors: ['PLATFORM_CONNECTION_NOT_FOUND'],
    handler: async ({ deps, principal, params }) => ({ status: 200, body: unwrap(await getConnection(deps, principal.appId, params.id)) }),
  });
  api.route({
    method: 'patch',
    path: '/v1/platform-connections/:id',
    operationId: 'updatePlatformConnection',
    summary: 'Rename, disable/enable, or change config (omitted secrets are kept)',
    scope: 'admin',
    params: idParams,
    body: updateConnectionInput,
    responses: { 200: { description: 'The updated connection', schema: connectionOut } },
    errors: ['PLATFORM_CONNECTION_NOT_FOUND', 'PLATFORM_CONNECTION_CONFLICT'],
    handler: async ({ deps, principal, params, body }) => ({
      status: 200,
      body: unwrap(await updateConnection(deps, principal.appId, params.id, body)),
    }),
  });
  api.route({
    method: 'delete',
    path: '/v1/platform-connections/:id',
    operationId: 'deletePlatformConnection',
    summary: 'Delete a platform connection',
    scope: 'admin',
    params: idParams,
    responses: { 204: { description: 'Deleted' } },
    errors: ['PLATFORM_CONNECTION_NOT_FOUND'],
    handler: async ({ deps, principal, params }) => {
      unwrap(await deleteConnection(deps, principal.appId, params.id));
      return { status: 204 };
    },
  });
}

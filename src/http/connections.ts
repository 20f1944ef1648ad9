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
    description:
      "Connects an account on a chat platform (GET /v1/platforms lists each platform's config and secret fields). The answer gives the `webhook_url` to register with the platform for inbound messages. A platform account can belong to one connection only, across all applications (409 otherwise).",
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
    description: "The application's platform connections, without their secrets.",
    summary: 'List platform connections',
    scope: 'admin',
    responses: { 200: { description: 'All connections', schema: z.object({ data: z.array(connectionOut) }) } },
    handler: async ({ deps, principal }) => ({ status: 200, body: { data: await listConnections(deps, principal.appId) } }),
  });
  api.route({
    method: 'get',
    path: '/v1/platform-connections/:id',
    operationId: 'getPlatformConnection',
    description: 'One platform connection: its platform, config (secrets left out), state and inbound `webhook_url`.',
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
    description:
      "Changes a connection's name, config or secrets, or disables and enables it. Secret fields left out of the body keep their stored value.",
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
    description:
      'Deletes a connection: its webhook URL stops answering and its platform account is free to connect again. Messages and events recorded through it stay in the ledger.',
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

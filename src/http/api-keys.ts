import { z } from 'zod';
import { createApiKey, listApiKeys, revokeApiKey } from '../auth/api-keys.js';
import { SCOPES, scopeSchema } from '../auth/scopes.js';
import { AppError, unwrap } from '../errors.js';
import type { Api } from './api.js';

const keyOut = z.object({
  id: z.string(),
  key_prefix: z.string().describe('the first characters of the key, to recognise it'),
  scopes: z.array(scopeSchema),
  created_at: z.string(),
  last_used_at: z.string().nullable().describe('to the minute'),
  revoked_at: z.string().nullable(),
});

/** The application's API keys: list (never the values), create (the value shown once), revoke. */
export function registerApiKeyRoutes(api: Api): void {
  api.route({
    method: 'get',
    path: '/v1/api-keys',
    operationId: 'listApiKeys',
    description: "The application's API keys, live ones first: their prefix (never the whole key), scopes, and when each was last used.",
    summary: "The application's API keys, live first: prefix, scopes, last use",
    scope: 'admin',
    responses: { 200: { description: 'Every key', schema: z.object({ data: z.array(keyOut) }) } },
    handler: async ({ deps, principal }) => ({ status: 200, body: { data: await listApiKeys(deps.sql, principal.appId) } }),
  });

  api.route({
    method: 'post',
    path: '/v1/api-keys',
    operationId: 'createApiKey',
    description: 'Creates an API key with scopes the calling key has itself. Its value is in this answer only; store it then.',
    summary: 'Create an API key with some of the caller\u2019s scopes; its value is returned this once',
    scope: 'admin',
    body: z.strictObject({ scopes: z.array(scopeSchema).min(1).max(SCOPES.length) }),
    responses: { 201: { description: 'The key, with its value', schema: keyOut.extend({ api_key: z.string() }) } },
    handler: async ({ deps, principal, body }) => {
      const key = unwrap(await createApiKey(deps.sql, principal, principal.appId, body.scopes));
      return { status: 201, headers: { 'Cache-Control': 'no-store' }, body: { ...key.record, api_key: key.apiKey } };
    },
  });

  api.route({
    method: 'delete',
    path: '/v1/api-keys/:id',
    operationId: 'revokeApiKey',
    description:
      'Revokes a key at once in every web process: requests with it answer 401, its open streams end, and portal sessions opened with it end.',
    summary: 'Revoke an API key at once, in every process; portal sessions it opened end with it',
    scope: 'admin',
    params: z.object({ id: z.string().max(100) }),
    responses: { 204: { description: 'Revoked' } },
    errors: ['NOT_FOUND'],
    handler: async ({ deps, principal, params }) => {
      if (!(await revokeApiKey(deps.sql, params.id, principal.appId))) throw new AppError('NOT_FOUND', 'No live API key with this id');
      return { status: 204 };
    },
  });
}

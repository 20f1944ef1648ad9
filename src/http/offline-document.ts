import { parseConfig } from '../config.js';
import type { Deps } from '../deps.js';
import { Api } from './api.js';
import type { RequestGuards } from './guards.js';
import { documentOptions } from './openapi.js';
import { ROUTES } from './routes.js';
import type { WebServices } from './web-services.js';

/**
 * The OpenAPI document GET /v1/openapi.json serves, built without a server, database or Redis,
 * for generators and linters (the typed client, scripts/client-generate.ts; `npm run
 * lint:openapi`, scripts/openapi-document.ts). Registering a route only declares it — its handler, the one user of the database and of `web`, never runs here —
 * and the one thing registration reads is the configuration (the stream route's limits), so
 * the defaults stand in for the environment.
 */
export function offlineOpenApiDocument(): Record<string, unknown> {
  const deps = { config: parseConfig({}) } as Deps;
  const api = new Api(deps, {} as RequestGuards);
  for (const register of ROUTES) register(api, { deps, web: {} as WebServices, onShutdown: [] });
  // As src/http/app.ts serves it; without PUBLIC_BASE_URL its server is relative (`/`).
  return api.openapi(documentOptions(deps.config));
}

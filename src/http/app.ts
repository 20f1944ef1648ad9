import express, { type Express } from 'express';
import type { Deps } from '../deps.js';
import { graphqlRouter } from '../graphql/handler.js';
import { createSchema } from '../graphql/schema.js';
import { Api } from './api.js';
import { jsonBody } from './json-body.js';
import { rejectUnstorableInput } from '../storable-text.js';
import { errorHandler, notFound } from './errors.js';
import { answerOptions, methodNotAllowed } from './allowed-methods.js';
import { loggableUrl, requestLog } from './request-log.js';
import { createGuards } from './guards.js';
import { adminRouter, opsRouter } from './ops.js';
import { portalStatic } from './portal-static.js';
import { apiReference, graphqlExplorer } from './explorers.js';
import { ROUTES } from './routes.js';
import { documentOptions } from './openapi.js';
import { inboundRouter } from '../inbound/receiver.js';
import { createWebServices, type WebServices } from './web-services.js';

export interface WebApp {
  app: Express;
  api: Api;
  web: WebServices;
  /** Hooks run on graceful shutdown before connections close (e.g. ending open streams). */
  onShutdown: (() => Promise<void> | void)[];
}

export { loggableUrl };

/** The express application: thin faces over the domain modules. */
export function createApp(deps: Deps): WebApp {
  const app = express();
  app.disable('x-powered-by');
  // Off unless configured: believing X-Forwarded-For from anyone would let a client pick the
  // address the per-source limits count it under.
  app.set('trust proxy', deps.config.TRUST_PROXY);
  app.set('query parser', 'simple');
  // No ETag: API answers are not cached by their clients, and hashing every body costs CPU on
  // every request (express computes one for POSTs too).
  app.set('etag', false);
  const onShutdown: WebApp['onShutdown'] = [];

  app.use(requestLog(deps));
  app.use(answerOptions(app));

  // Platform webhooks come first: they read their raw bytes (signatures) and skip API auth and
  // the API rate limit.
  app.use(inboundRouter(deps));

  app.use(opsRouter(deps));
  app.use(adminRouter(deps));

  app.use(jsonBody(deps.config.BODY_LIMIT_BYTES));
  app.use(rejectUnstorableInput(deps.config.JSON_MAX_DEPTH));

  const web = createWebServices(deps);
  onShutdown.push(
    () => web.wakes.close(),
    () => web.reports.close(),
  );
  const guards = createGuards(deps, web.stamps);
  const api = new Api(deps, guards);
  for (const register of ROUTES) register(api, { deps, web, onShutdown });
  // Built on first request, once every route is declared: converting every schema takes tens of
  // milliseconds of the event loop, and this route is unauthenticated.
  let document: Record<string, unknown> | undefined;
  app.get('/v1/openapi.json', (_req, res) => {
    document ??= api.openapi(documentOptions(deps.config));
    res.json(document);
  });
  app.use(api.router);
  app.use(apiReference());
  // Before GraphQL over HTTP: a browser's GET of /graphql is answered with the explorer page.
  app.use(graphqlExplorer());
  app.use(graphqlRouter(deps, web, guards, createSchema()));
  app.use(portalStatic(deps));

  app.use(methodNotAllowed(app));
  app.use(notFound);
  app.use(errorHandler(deps.logger));
  return { app, api, web, onShutdown };
}

import { randomUUID } from 'node:crypto';
import express, { type Express, type Request } from 'express';
import { pinoHttp } from 'pino-http';
import type { Deps } from '../deps.js';
import { graphqlRouter } from '../graphql/handler.js';
import { createSchema } from '../graphql/schema.js';
import { Api } from './api.js';
import { rejectUnstorableBody } from '../storable-text.js';
import { errorHandler, notFound } from './errors.js';
import { createGuards } from './guards.js';
import { adminRouter, opsRouter } from './ops.js';
import { ROUTES } from './routes.js';
import { inboundRouter } from '../inbound/receiver.js';
import { createWebServices, type WebServices } from './web-services.js';

export interface WebApp {
  app: Express;
  api: Api;
  web: WebServices;
  /** Hooks run on graceful shutdown before connections close (e.g. ending open streams). */
  onShutdown: (() => Promise<void> | void)[];
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,100}$/;

/**
 * A request URL fit for the log: no query string, and no path segment that is a credential —
 * an inbound webhook URL's secret, a link code being activated (still valid when the attempt
 * was throttled).
 */
export function loggableUrl(url: string): string {
  return url
    .split('?')[0]
    .replace(/^(\/webhooks\/[^/]+\/)[^/]+/, '$1[redacted]')
    .replace(/^(\/v1\/link-codes\/)[^/]+/, '$1[redacted]');
}

/** The express application: thin faces over the domain modules. */
export function createApp(deps: Deps): WebApp {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', true);
  app.set('query parser', 'simple');
  const onShutdown: WebApp['onShutdown'] = [];

  app.use(
    pinoHttp({
      logger: deps.logger,
      genReqId: (req, res) => {
        const given = req.headers['x-request-id'];
        const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
        res.setHeader('X-Request-Id', id);
        return id;
      },
      customLogLevel: (_req, res, err) => (err || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'info' : 'debug'),
      // Inbound platform bodies and API bodies can carry secrets or personal data: not logged.
      // Inbound webhook URLs carry their secret as the last segment: never logged.
      serializers: { req: (req) => ({ id: req.id, method: req.method, url: loggableUrl(String(req.url)) }) },
    }),
  );

  app.use((req, res, next) => {
    const end = deps.metrics.httpDuration.startTimer();
    res.on('finish', () => {
      const route = req.route ? `${req.baseUrl}${(req.route as { path: string }).path}` : 'unmatched';
      end({ method: req.method, route, status: String(res.statusCode) });
    });
    next();
  });

  app.use(opsRouter(deps));
  app.use(adminRouter(deps));
  // Platform webhooks read their raw bytes (signatures) and skip API auth and the API rate limit.
  app.use(inboundRouter(deps));

  // Raw bytes kept beside the parsed body: signatures (platform webhooks, idempotency hashes) are over them.
  app.use(
    express.json({
      limit: deps.config.BODY_LIMIT_BYTES,
      type: ['application/json', 'application/*+json'],
      verify: (req, _res, buf) => {
        (req as Request & { rawBody?: Buffer }).rawBody = buf;
      },
    }),
  );
  app.use(rejectUnstorableBody);

  const web = createWebServices(deps);
  onShutdown.push(() => web.wakes.close(), () => web.ledger.close());
  const guards = createGuards(deps);
  const api = new Api(deps, guards);
  for (const register of ROUTES) register(api, { deps, web, onShutdown });
  app.get('/v1/openapi.json', (_req, res) => {
    res.json(api.openapi({ title: 'Messaging gateway', version: '1' }));
  });
  app.use(api.router);
  app.use(graphqlRouter(deps, web, guards, createSchema()));

  app.use(notFound);
  app.use(errorHandler(deps.logger));
  return { app, api, web, onShutdown };
}

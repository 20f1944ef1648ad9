import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import express, { type Express, type Request, type RequestHandler } from 'express';
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

/** The caller's X-Request-Id when it is a sane token, a new one otherwise; echoed on the response. */
function requestId(req: IncomingMessage, res: ServerResponse): string {
  const given = req.headers['x-request-id'];
  const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
  res.setHeader('X-Request-Id', id);
  return id;
}

const levelOf = (status: number) => (status >= 500 ? 'error' : status >= 400 ? 'info' : 'debug');

/**
 * The request log of platform deliveries: the same request id, line and redaction as the API's,
 * without pino-http's child logger per request, which cost the receiver as much as verifying and
 * queueing the delivery. A logger for the request is made only if something logs through it.
 */
function deliveryLog(logger: Deps['logger']): RequestHandler {
  return (req, res, next) => {
    const started = Date.now();
    const id = requestId(req, res);
    const reqLine = () => ({ id, method: req.method, url: loggableUrl(req.originalUrl) });
    let log: Deps['logger'] | undefined;
    Object.defineProperty(req, 'log', { configurable: true, get: () => (log ??= logger.child({ req: reqLine() })) });
    res.once('finish', () => {
      const level = levelOf(res.statusCode);
      if (logger.isLevelEnabled(level)) logger[level]({ req: reqLine(), res: { statusCode: res.statusCode }, responseTime: Date.now() - started }, 'request completed');
    });
    next();
  };
}

/** The express application: thin faces over the domain modules. */
export function createApp(deps: Deps): WebApp {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', true);
  app.set('query parser', 'simple');
  const onShutdown: WebApp['onShutdown'] = [];

  app.use((req, res, next) => {
    const end = deps.metrics.httpDuration.startTimer();
    res.on('finish', () => {
      const route = req.route ? `${req.baseUrl}${(req.route as { path: string }).path}` : 'unmatched';
      end({ method: req.method, route, status: String(res.statusCode) });
    });
    next();
  });

  // Platform webhooks come first: they read their raw bytes (signatures), skip API auth and the
  // API rate limit, and log through deliveryLog.
  app.use(inboundRouter(deps, deliveryLog(deps.logger)));

  app.use(
    pinoHttp({
      logger: deps.logger,
      genReqId: requestId,
      customLogLevel: (_req, res, err) => (err ? 'error' : levelOf(res.statusCode)),
      // Inbound platform bodies and API bodies can carry secrets or personal data: not logged.
      // Inbound webhook URLs carry their secret as the last segment: never logged.
      serializers: { req: (req) => ({ id: req.id, method: req.method, url: loggableUrl(String(req.url)) }) },
    }),
  );

  app.use(opsRouter(deps));
  app.use(adminRouter(deps));

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
  onShutdown.push(() => web.wakes.close());
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

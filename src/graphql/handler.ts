import express, { type Request, type Response, type NextFunction, type Router } from 'express';
import { printSchema, type GraphQLSchema, type ExecutionResult } from 'graphql';
import { createHandler as createHttpHandler } from 'graphql-http/lib/use/express';
import { createHandler as createSseHandler } from 'graphql-sse/lib/use/express';
import { authenticate, requireScope, type Principal } from '../auth/api-keys.js';
import { AppError } from '../errors.js';
import type { Deps } from '../deps.js';
import type { RequestGuards } from '../http/guards.js';
import type { WebServices } from '../http/web-services.js';
import { createContext, formatGraphqlError, type GqlContext } from './context.js';
import { depthLimit } from './limits.js';
import { storableLiterals } from '../storable-text.js';
import { streamSlotGuard } from '../stream/service.js';

const principalOf = (res: Response) => res.locals.principal as Principal;
const resOf = (req: { context?: unknown }) => (req.context as { res: Response }).res;

/**
 * GraphQL over HTTP at POST /graphql and POST /, and GraphQL over SSE (distinct connections)
 * at POST / with `Accept: text/event-stream`. Every request is authenticated before the
 * GraphQL layer sees it, so subscriptions and introspection get no way around the key.
 */
export function graphqlRouter(deps: Deps, web: WebServices, guards: RequestGuards, schema: GraphQLSchema): Router {
  const router = express.Router();
  const sdl = printSchema(schema);
  router.get('/graphql/schema.graphql', (_req, res) => {
    res.type('text/plain; charset=utf-8').send(sdl);
  });

  const mapErrors = (result: ExecutionResult): ExecutionResult =>
    result.errors ? { ...result, errors: result.errors.map((e) => formatGraphqlError(e)) } : result;

  const http = createHttpHandler<GqlContext>({
    schema,
    context: (req) => createContext(deps, web, principalOf(resOf(req))),
    validationRules: (_req, _args, specified) => [...specified, depthLimit(10), storableLiterals],
    onOperation: (_req, _args, result) => mapErrors(result),
    // Errors found before execution (syntax, validation, variables) get their code the same way.
    formatError: (err) => formatGraphqlError(err),
  });
  const sse = createSseHandler<GqlContext>({
    schema,
    // The response rides along so a subscription can drop a client that cannot keep up.
    context: (req) => ({ ...createContext(deps, web, principalOf(resOf(req))), res: resOf(req) }),
    onNext: (_ctx, _req, result) => mapErrors(result as ExecutionResult),
  });

  // Any valid key reaches the schema; each resolver checks the scope its operation needs.
  // Subscriptions read events, so the SSE face demands `events:read` up front.
  const auth = async (req: Request, res: Response, next: NextFunction) => {
    const creds = { authorization: req.get('authorization'), appId: req.get('x-service-app-id') };
    const result = await authenticate(deps.sql, creds, { appIdRequired: !isSse(req) });
    if (!result.ok) throw AppError.from(result.error);
    if (isSse(req)) {
      const scoped = requireScope(result.value, 'events:read');
      if (!scoped.ok) throw AppError.from(scoped.error);
    } else {
      await guards.rateLimit(result.value.appId, res);
    }
    res.locals.principal = result.value;
    next();
  };

  const slot = streamSlotGuard(web.streams);
  const serve = (req: Request, res: Response, next: NextFunction) =>
    isSse(req) ? slot(req, res, () => sse(req, res).catch(next)).catch(next) : http(req, res, next);

  router.post('/graphql', auth, serve);
  router.get('/graphql', auth, serve);
  router.post('/', auth, serve);
  return router;
}

const isSse = (req: Request) => (req.get('accept') ?? '').includes('text/event-stream');


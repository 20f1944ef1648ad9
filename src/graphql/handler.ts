import { STATUS_CODES } from 'node:http';
import express, { type Request, type Response, type NextFunction, type Router } from 'express';
import { printSchema, type GraphQLSchema, type ExecutionResult } from 'graphql';
import { createHandler as createHttpHandler } from 'graphql-http/lib/use/express';
import { createHandler as createSseHandler } from 'graphql-sse/lib/use/express';
import { requireScope, type Principal } from '../auth/api-keys.js';
import { AppError } from '../errors.js';
import type { Deps } from '../deps.js';
import { credentialsOf, type RequestGuards } from '../http/guards.js';
import { authenticateRequest } from '../portal/auth.js';
import type { WebServices } from '../http/web-services.js';
import { admitOperation, type OperationRequest } from './admission.js';
import { createContext, formatGraphqlError, type GqlContext } from './context.js';
import { executeOperation } from './execution.js';
import { graphqlLimits } from './limits.js';
import { streamSlotGuard } from '../stream/service.js';
import { graphqlTransport, mutationOverGet } from './transport.js';

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

  const limits = graphqlLimits(deps.config);
  /**
   * Both endpoints admit a document the same way before anything runs: within the limits or
   * 400, then its points charged to the application's rate limit or 429. `spent` is what the
   * door already charged (one point on the HTTP face, which counts every request).
   */
  const admit = async <C extends GqlContext>(res: Response, params: OperationRequest, spent: number, contextValue: C) => {
    const admission = admitOperation(schema, limits, params);
    if (!admission.ok) return refusal(400, { errors: admission.errors.map((e) => formatGraphqlError(e)) });
    const { operationName, variables } = params;
    const overGet = mutationOverGet(res.req.method, admission.document, operationName);
    if (overGet) return refusal(overGet.status, overGet.toBody(), overGet.headers);
    const more = admission.points - spent;
    if (more > 0) {
      try {
        await guards.rateLimit(principalOf(res).appId, res, more);
      } catch (err) {
        if (err instanceof AppError) return refusal(err.status, err.toBody(), err.headers);
        throw err;
      }
    }
    return {
      schema,
      document: admission.document,
      operationName: operationName ?? undefined,
      variableValues: variables ?? undefined,
      contextValue,
    };
  };

  const http = createHttpHandler<GqlContext>({
    schema,
    execute: executeOperation as never,
    onSubscribe: (req, params) => admit(resOf(req), params, 1, createContext(deps, web, principalOf(resOf(req)))),
    onOperation: (_req, _args, result) => mapErrors(result),
    // Errors found before execution (syntax, validation, variables) get their code the same way.
    formatError: (err) => formatGraphqlError(err),
  });
  const sse = createSseHandler<GqlContext>({
    schema,
    // The response rides along so a subscription can drop a client that cannot keep up.
    onSubscribe: (req, params) => admit(resOf(req), params, 0, { ...createContext(deps, web, principalOf(resOf(req))), res: resOf(req) }),
    // `admit` validated already, with the full rule list.
    validate: () => [],
    onNext: (_ctx, _req, result) => mapErrors(result as ExecutionResult),
  });

  // Any valid key reaches the schema; each resolver checks the scope its operation needs.
  // Subscriptions read events, so the SSE face demands `events:read` up front.
  const auth = async (req: Request, res: Response, next: NextFunction) => {
    const result = await authenticateRequest(deps.sql, web.stamps, credentialsOf(req), { appIdRequired: !isSse(req) });
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

  const transport = graphqlTransport(isSse);
  router.post('/graphql', auth, transport, serve);
  router.get('/graphql', auth, transport, serve);
  router.post('/', auth, transport, serve);
  return router;
}

/** A refusal answered before anything runs, in the same shape on both endpoints. */
const refusal = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  [
    JSON.stringify(body),
    { status, statusText: STATUS_CODES[status] ?? '', headers: { ...headers, 'content-type': 'application/json; charset=utf-8' } },
  ] as const;

const isSse = (req: Request) => (req.get('accept') ?? '').includes('text/event-stream');

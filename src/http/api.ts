import express, { type Request, type Response, type Router } from 'express';
import { z } from 'zod';
import type { Principal } from '../auth/api-keys.js';
import type { Scope } from '../auth/scopes.js';
import type { Deps } from '../deps.js';
import { AppError, type ErrorCode, type ErrorDetail } from '../errors.js';
import { JSON_TYPES } from './json-body.js';
import { noteWrite, readOnly } from '../replica-reads.js';
import { zodDetails } from './zod-details.js';
import type { RequestGuards } from './guards.js';
import { type DocumentOptions, type HeaderParam, OPERATION_ID, openApiDocument } from './openapi.js';

type Method = 'get' | 'post' | 'patch' | 'put' | 'delete';

export interface HandlerContext<B, Q, P> {
  req: Request;
  res: Response;
  deps: Deps;
  /** Present on every route that names a scope. */
  principal: Principal;
  body: B;
  query: Q;
  params: P;
}

/** What a handler returns; the route writes it. Return `undefined` when the handler wrote the response itself. */
export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface RouteSpec<B, Q, P> {
  method: Method;
  /** Express path pattern, e.g. `/v1/events/:id`. */
  path: string;
  /** The operation's name in the OpenAPI document and so in generated clients: camelCase, unique, never renamed. */
  operationId: string;
  summary: string;
  /** Longer prose for the OpenAPI document, when the summary is not the whole story. */
  description?: string;
  /** Scope the API key needs. Leave out for routes outside API-key auth. */
  scope?: Scope;
  /** Without `scope`: the handler authenticates by the portal session cookie itself, as the OpenAPI document says. */
  portalCookie?: true;
  /** Rate-limited per application. @default true when `scope` is set */
  rateLimited?: boolean;
  /** Whether X-Service-App-ID must be sent (it must match the key whenever it is). @default true */
  appIdRequired?: boolean;
  /** The JSON body. A route without one takes no fields (an empty body, `{}`, or none). */
  body?: z.ZodType<B>;
  /** The handler reads a multipart/form-data body itself (uploads): no JSON body is parsed. */
  multipart?: true;
  /** The query string. A route without one takes no parameters. */
  query?: z.ZodType<Q>;
  params?: z.ZodType<P>;
  /** Request headers the handler reads (Idempotency-Key, Last-Event-ID), for the OpenAPI document. */
  headers?: HeaderParam[];
  /** A body that is not JSON (a multipart upload), as an OpenAPI content map; the handler parses it. */
  requestContent?: Record<string, { schema: Record<string, unknown> }>;
  /**
   * Documented responses: status → description and the JSON body's schema, or the `mediaType`
   * (and `mediaSchema`) of a body that is not JSON. Error codes go in `errors`.
   */
  responses: Record<number, { description: string; schema?: z.ZodType; mediaType?: string; mediaSchema?: Record<string, unknown> }>;
  /** Error codes the route may answer with, for the API description. */
  errors?: ErrorCode[];
  handler: (ctx: HandlerContext<B, Q, P>) => Promise<Reply | undefined>;
}

/**
 * The REST surface: each route is declared once with its zod schemas, which validate the
 * request, type the handler and describe the route in the OpenAPI document.
 */
export class Api {
  readonly router: Router = express.Router();
  private readonly specs: RouteSpec<unknown, unknown, unknown>[] = [];

  constructor(
    private readonly deps: Deps,
    private readonly guards: RequestGuards,
  ) {}

  route<B = undefined, Q = undefined, P = undefined>(spec: RouteSpec<B, Q, P>): void {
    // A generated client names its methods after operationIds: a missing or repeated one would
    // break it, so the route is refused when it is declared, not when a client is generated.
    if (!OPERATION_ID.test(spec.operationId ?? ''))
      throw new Error(`${spec.method.toUpperCase()} ${spec.path}: operationId must be camelCase, got ${JSON.stringify(spec.operationId)}`);
    const taken = this.specs.find((s) => s.operationId === spec.operationId);
    if (taken)
      throw new Error(
        `${spec.method.toUpperCase()} ${spec.path}: operationId ${spec.operationId} is already ${taken.method.toUpperCase()} ${taken.path}'s`,
      );
    this.specs.push(spec as RouteSpec<unknown, unknown, unknown>);
    const { deps, guards } = this;
    this.router[spec.method](spec.path, async (req: Request, res: Response) => {
      deps.tracing?.routeMatched(req.method, `${req.baseUrl}${spec.path}`);
      let principal = undefined as unknown as Principal;
      if (spec.scope) {
        principal = await guards.authenticate(req, spec.scope, { appIdRequired: spec.appIdRequired !== false });
        if (spec.rateLimited !== false) await guards.rateLimit(principal.appId, res);
      }
      const { body, query, params } = parseRequest(spec, req);
      const run = (d: Deps) => spec.handler({ req, res, deps: d, principal, body, query, params } as HandlerContext<B, Q, P>);
      const reply = await serve(spec.method, deps, principal, res, run);
      if (!reply || res.headersSent) return;
      for (const [k, v] of Object.entries(reply.headers ?? {})) res.setHeader(k, v);
      if (reply.body === undefined) res.status(reply.status).end();
      else res.status(reply.status).json(reply.body);
    });
  }

  /** OpenAPI 3.1 document of every declared route. */
  openapi(options: DocumentOptions): Record<string, unknown> {
    return openApiDocument(this.specs, options);
  }
}

/**
 * Runs a route's handler: a GET of an application reads under the replica rule
 * (src/replica-reads.ts), anything else on the primary and then marks the application as
 * having written, so its next reads see what it wrote.
 */
async function serve(
  method: Method,
  deps: Deps,
  principal: Principal | undefined,
  res: Response,
  run: (d: Deps) => Promise<Reply | undefined>,
) {
  if (!principal) return run(deps);
  if (method === 'get') return readOnly(deps, principal.appId, run, { retryable: () => !res.headersSent });
  try {
    return await run(deps);
  } finally {
    await noteWrite(deps, principal.appId);
  }
}

const NO_FIELDS = z.strictObject({});

/**
 * The request's parts parsed by the route's schemas, every problem in all of them reported in
 * one VALIDATION_ERROR. Schemas refuse unknown fields (strict objects), and a part without a
 * schema takes none, so a misspelt or unsupported field is an error rather than ignored.
 */
function parseRequest<B, Q, P>(spec: RouteSpec<B, Q, P>, req: Request): { body: B; query: Q; params: P } {
  const details: ErrorDetail[] = [];
  const part = <T>(schema: z.ZodType<T> | undefined, value: unknown, prefix: string[]): T => {
    const result = (schema ?? NO_FIELDS).safeParse(value);
    if (!result.success) details.push(...zodDetails(result.error, prefix));
    return (result.success && schema ? result.data : undefined) as T;
  };
  const takesJson = spec.method !== 'get' && !spec.multipart;
  const body = takesJson ? part(spec.body, jsonBodyOf(req), []) : (undefined as B);
  const query = part(spec.query, req.query, ['query']);
  const params = spec.params ? part(spec.params, req.params, ['params']) : (undefined as P);
  if (details.length) throw new AppError('VALIDATION_ERROR', `Invalid request: ${summary(details)}`, details);
  return { body, query, params };
}

/** The parsed JSON body, `{}` when none was sent; any other body is refused with 415. */
function jsonBodyOf(req: Request): unknown {
  const length = req.headers['content-length'];
  const hasBody = req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
  if (hasBody && !req.is(JSON_TYPES)) throw new AppError('UNSUPPORTED_MEDIA_TYPE', 'The request body must be application/json');
  return req.body ?? {};
}

const summary = (details: ErrorDetail[]) =>
  details
    .slice(0, 3)
    .map((d) => `${d.path?.length ? d.path.join('.') : 'body'}: ${d.message}`)
    .join('; ') + (details.length > 3 ? `; and ${details.length - 3} more` : '');

import express, { type Request, type Response, type Router } from 'express';
import { z } from 'zod';
import type { Principal } from '../auth/api-keys.js';
import type { Scope } from '../auth/scopes.js';
import type { Deps } from '../deps.js';
import { AppError, type ErrorCode, ERROR_STATUS } from '../errors.js';
import { zodDetails } from './zod-details.js';
import type { RequestGuards } from './guards.js';

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
  summary: string;
  /** Scope the API key needs. Leave out for routes outside API-key auth. */
  scope?: Scope;
  /** Rate-limited per application. @default true when `scope` is set */
  rateLimited?: boolean;
  /** Whether X-Service-App-ID must be sent (it must match the key whenever it is). @default true */
  appIdRequired?: boolean;
  body?: z.ZodType<B>;
  query?: z.ZodType<Q>;
  params?: z.ZodType<P>;
  /** Documented responses: status → description and optional body schema. */
  responses: Record<number, { description: string; schema?: z.ZodType }>;
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
    this.specs.push(spec as RouteSpec<unknown, unknown, unknown>);
    const { deps, guards } = this;
    this.router[spec.method](spec.path, async (req: Request, res: Response) => {
      let principal = undefined as unknown as Principal;
      if (spec.scope) {
        principal = await guards.authenticate(req, spec.scope, { appIdRequired: spec.appIdRequired !== false });
        if (spec.rateLimited !== false) await guards.rateLimit(principal.appId, res);
      }
      const body = parsePart(spec.body, req.body ?? {}, 'body');
      const query = parsePart(spec.query, req.query, 'query');
      const params = parsePart(spec.params, req.params, 'params');
      const reply = await spec.handler({ req, res, deps, principal, body, query, params } as HandlerContext<B, Q, P>);
      if (!reply || res.headersSent) return;
      for (const [k, v] of Object.entries(reply.headers ?? {})) res.setHeader(k, v);
      if (reply.body === undefined) res.status(reply.status).end();
      else res.status(reply.status).json(reply.body);
    });
  }

  /** OpenAPI 3.1 document of every declared route (zod 4 converts to JSON Schema natively). */
  openapi(info: { title: string; version: string }): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    for (const spec of this.specs) {
      const path = spec.path.replace(/:([A-Za-z_]+)/g, '{$1}');
      const op: Record<string, unknown> = { summary: spec.summary, responses: {} };
      if (spec.scope) op.security = [{ apiKey: [], appId: [] }];
      if (spec.scope) op['x-required-scope'] = spec.scope;
      const parameters: unknown[] = [];
      for (const [where, schema] of [
        ['path', spec.params],
        ['query', spec.query],
      ] as const) {
        const js = schema ? (toJsonSchema(schema, 'input') as { properties?: Record<string, unknown>; required?: string[] }) : undefined;
        for (const [name, s] of Object.entries(js?.properties ?? {})) {
          parameters.push({ name, in: where, required: where === 'path' || (js?.required ?? []).includes(name), schema: s });
        }
      }
      if (parameters.length) op.parameters = parameters;
      if (spec.body) op.requestBody = { required: true, content: { 'application/json': { schema: toJsonSchema(spec.body, 'input') } } };
      const responses = op.responses as Record<string, unknown>;
      for (const [status, r] of Object.entries(spec.responses)) {
        responses[status] = {
          description: r.description,
          ...(r.schema ? { content: { 'application/json': { schema: toJsonSchema(r.schema, 'output') } } } : {}),
        };
      }
      const codes = new Set<ErrorCode>([
        ...(spec.errors ?? []),
        ...(spec.scope ? (['UNAUTHORIZED', 'FORBIDDEN', 'RATE_LIMITED'] as ErrorCode[]) : []),
      ]);
      if (spec.body || spec.query || spec.params) codes.add('VALIDATION_ERROR');
      for (const code of codes) {
        const status = String(ERROR_STATUS[code]);
        const existing = responses[status] as { description: string } | undefined;
        responses[status] = {
          description: existing ? `${existing.description}; ${code}` : code,
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        };
      }
      (paths[path] ??= {})[spec.method] = op;
    }
    return {
      openapi: '3.1.0',
      info,
      paths,
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: 'API key' },
          appId: { type: 'apiKey', in: 'header', name: 'X-Service-App-ID' },
        },
        schemas: {
          Error: {
            type: 'object',
            required: ['error'],
            properties: {
              error: {
                type: 'object',
                required: ['code', 'message'],
                properties: {
                  code: { type: 'string', enum: Object.keys(ERROR_STATUS) },
                  message: { type: 'string' },
                  details: { type: 'array', items: { type: 'object' } },
                },
              },
            },
          },
        },
      },
    };
  }
}

function parsePart<T>(schema: z.ZodType<T> | undefined, value: unknown, where: 'body' | 'query' | 'params'): T {
  if (!schema) return undefined as T;
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw new AppError('VALIDATION_ERROR', `Invalid request ${where}`, zodDetails(result.error, where === 'body' ? [] : [where]));
}

function toJsonSchema(schema: z.ZodType, io: 'input' | 'output'): unknown {
  try {
    return z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' });
  } catch {
    return {};
  }
}

import type { NextFunction, Request, Response } from 'express';
import { type DocumentNode, getOperationAST } from 'graphql';
import { z } from 'zod';
import { AppError } from '../errors.js';
import { zodDetails } from '../http/zod-details.js';

const jsonObject = z.record(z.string(), z.unknown());

/** GraphQL over HTTP's request parameters, from a JSON body or (GET) the query string. */
const requestParams = z.object({
  query: z.string({ error: 'required: the GraphQL document, a string' }),
  operationName: z.string().nullish(),
  variables: jsonObject.nullish(),
  extensions: jsonObject.nullish(),
});

/** What graphql-http can answer with (it refuses any other `Accept` with an empty 406). */
const ANSWER_TYPES = ['application/json', 'application/graphql-response+json'];

/** A GET's JSON-valued parameters (`variables`, `extensions`), parsed; a detail for each that is not JSON. */
function fromQueryString(query: Request['query']): { params: Record<string, unknown>; bad: { path: string[]; message: string }[] } {
  const params: Record<string, unknown> = {};
  const bad: { path: string[]; message: string }[] = [];
  for (const [name, value] of Object.entries(query)) {
    if (name !== 'variables' && name !== 'extensions') {
      params[name] = value;
      continue;
    }
    if (typeof value !== 'string') {
      params[name] = value;
      continue;
    }
    try {
      params[name] = JSON.parse(value);
    } catch {
      bad.push({ path: ['query', name], message: 'not valid JSON' });
    }
  }
  return { params, bad };
}

/**
 * The transport checks of GraphQL over HTTP and over SSE, made before graphql-http or
 * graphql-sse sees the request: those answer their own refusals with an empty body (415, 406)
 * or a GraphQL `errors` array (a missing or mistyped `query`), where every refusal of this
 * service is the one error body (src/http/errors.ts). What reaches them is a well-formed request.
 */
export function graphqlTransport(isSse: (req: Request) => boolean) {
  return (req: Request, _res: Response, next: NextFunction) => {
    if (!isSse(req) && !req.accepts(ANSWER_TYPES))
      return next(new AppError('NOT_ACCEPTABLE', `GraphQL answers as ${ANSWER_TYPES.join(' or ')}; the Accept header allows neither`));
    let raw: unknown = req.body;
    if (req.method === 'GET') {
      const { params, bad } = fromQueryString(req.query);
      if (bad.length) return next(new AppError('VALIDATION_ERROR', 'Invalid GraphQL request: variables or extensions are not JSON', bad));
      raw = params;
    } else if (!req.is('application/json')) {
      return next(new AppError('UNSUPPORTED_MEDIA_TYPE', 'GraphQL requests are POSTed as application/json'));
    }
    const parsed = requestParams.safeParse(raw ?? {});
    if (!parsed.success) {
      const details = zodDetails(parsed.error, req.method === 'GET' ? ['query'] : []);
      return next(
        new AppError(
          'VALIDATION_ERROR',
          `Invalid GraphQL request: ${details.map((d) => `${d.path?.join('.')}: ${d.message}`).join('; ')}`,
          details,
        ),
      );
    }
    next();
  };
}

/** GraphQL over HTTP forbids a mutation over GET (a link or a prefetch must not change anything): 405, `Allow: POST`. */
export function mutationOverGet(method: string, document: DocumentNode, operationName: string | null | undefined): AppError | undefined {
  if (method !== 'GET' || getOperationAST(document, operationName)?.operation !== 'mutation') return undefined;
  return new AppError('METHOD_NOT_ALLOWED', 'Mutations are sent with POST, not GET', undefined, { headers: { Allow: 'POST' } });
}

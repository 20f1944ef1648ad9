import createFetchClient, { type Client, type FetchResponse, type MaybeOptionalInit } from 'openapi-fetch';
import { unwrap } from './errors.js';
import { OPERATIONS } from './generated/operations.js';
import type { paths } from './generated/schema.js';
import { createGraphqlClients, type GraphqlClients } from './graphql.js';
import { streamEvents, type StreamEvent, type StreamOptions } from './stream.js';

export interface GatewayClientOptions {
  /** The service's address, e.g. `https://gateway.example.com` (no `/v1`). */
  baseUrl: string;
  /** An API key (`Authorization: Bearer …`). */
  apiKey: string;
  /** The application the key belongs to (`X-Service-App-ID`). */
  appId: string;
  /** A fetch to use instead of the global one (proxies, tests). */
  fetch?: typeof globalThis.fetch;
}

type Catalog = typeof OPERATIONS;
/** The name of a REST operation: its operationId in the OpenAPI document. */
export type OperationName = keyof Catalog;
type PathOf<N extends OperationName> = Catalog[N]['path'];
type MethodOf<N extends OperationName> = Catalog[N]['method'];
type OperationInit<N extends OperationName> = MaybeOptionalInit<paths[PathOf<N>], MethodOf<N>>;
type Data<R> = [Exclude<R, undefined>] extends [never] ? undefined : Exclude<R, undefined>;
/** What an operation answers on success (the union of its 2xx bodies; undefined for 204). */
export type OperationData<N extends OperationName> = Data<
  FetchResponse<paths[PathOf<N>][MethodOf<N>] & Record<string | number, unknown>, object, `${string}/${string}`>['data']
>;

/**
 * One method per operation of the document, named by its operationId: it takes openapi-fetch's
 * init (`params.path`, `params.query`, `body`, `headers`) and resolves to the success body, or
 * rejects with a GatewayError carrying the service's status and code.
 */
export type Operations = {
  [N in OperationName]: (
    ...init: undefined extends OperationInit<N> ? [init?: OperationInit<N>] : [init: OperationInit<N>]
  ) => Promise<OperationData<N>>;
};

type GetOperation<P extends keyof paths> = paths[P] extends { get: infer O } ? O : never;
type PageBody<P extends keyof paths> =
  GetOperation<P> extends { responses: { 200: { content: { 'application/json': infer B } } } } ? B : never;
/** The listings answering `{ data, next_cursor, has_more }` pages, continued with `?after=`. */
export type PagedPath = {
  [P in keyof paths]: PageBody<P> extends { data: unknown[]; has_more: boolean } ? P : never;
}[keyof paths];
/** One item of a listing's pages. */
export type PageItem<P extends PagedPath> = PageBody<P> extends { data: (infer I)[] } ? I : never;
type PageParams<P extends PagedPath> = GetOperation<P> extends { parameters: infer X } ? X : never;

type JsonBody<P extends keyof paths> = paths[P] extends { post: { requestBody: { content: { 'application/json': infer B } } } } ? B : never;

/** Options of the operations the service makes safe to retry. */
export interface IdempotentOptions {
  /**
   * Sent as `Idempotency-Key`: a retry with the same key and body answers with the resource
   * the first attempt created (for 24 hours) instead of creating another; the same key with
   * another body is refused with IDEMPOTENCY_CONFLICT.
   */
  idempotencyKey?: string;
}

export interface GatewayClient {
  /** openapi-fetch over the document's paths: `rest.GET('/v1/events', { params: { query: { limit: 10 } } })`. */
  rest: Client<paths>;
  /** Every REST operation by name: `ops.listEvents({ params: { query: { limit: 10 } } })`. */
  ops: Operations;
  /** POST /v1/events: the stored event (201) or, past the service's wait bound, `{ id, status: 'queued' }` (202). */
  createEvent(body: JsonBody<'/v1/events'>, options?: IdempotentOptions): Promise<OperationData<OperationFor<'/v1/events', 'post'>>>;
  /** POST /v1/messages: sent (201) or queued (202), with the event id of the message. */
  sendMessage(body: JsonBody<'/v1/messages'>, options?: IdempotentOptions): Promise<OperationData<OperationFor<'/v1/messages', 'post'>>>;
  /**
   * POST /v1/files: uploads bytes as the multipart `file` field (the service sniffs the type
   * from the content) and answers the stored file's metadata; send its `id` in `fileIds`.
   */
  uploadFile(file: Blob, filename: string): Promise<OperationData<OperationFor<'/v1/files', 'post'>>>;
  /**
   * Every item of a listing, oldest first, fetching pages as the loop asks for them; stops at
   * the page that says `has_more: false`. `params.query.after` starts after that cursor.
   */
  paginate<P extends PagedPath>(path: P, params?: PageParams<P>): AsyncGenerator<PageItem<P>, void, undefined>;
  /** The event stream (GET /events/stream) as an async iterator that reconnects with `Last-Event-ID`. */
  stream(options?: StreamOptions): AsyncGenerator<StreamEvent, void, undefined>;
  /** GraphQL queries and mutations (graphql-http) and subscriptions (graphql-sse), authenticated. */
  graphql: GraphqlClients;
}

/** The operation name the catalog gives a path and method (whatever the document calls it). */
export type OperationFor<P extends string, M extends string> = {
  [N in OperationName]: PathOf<N> extends P ? (MethodOf<N> extends M ? N : never) : never;
}[OperationName];

export function createGatewayClient(options: GatewayClientOptions): GatewayClient {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const headers = { Authorization: `Bearer ${options.apiKey}`, 'X-Service-App-ID': options.appId };
  const fetchFn = options.fetch ?? globalThis.fetch;
  const rest = createFetchClient<paths>({ baseUrl, headers, fetch: (request) => fetchFn(request) });
  const request = rest.request as (
    method: string,
    path: string,
    init?: unknown,
  ) => Promise<FetchResponse<never, object, `${string}/${string}`>>;

  const ops = Object.fromEntries(
    Object.entries(OPERATIONS).map(([name, { method, path }]) => [
      name,
      async (init?: unknown) => unwrap(await request(method, path, init)),
    ]),
  ) as unknown as Operations;

  const idempotency = (o: IdempotentOptions = {}) => (o.idempotencyKey === undefined ? {} : { 'Idempotency-Key': o.idempotencyKey });

  return {
    rest,
    ops,
    createEvent: async (body, o) => unwrap(await rest.POST('/v1/events', { body, headers: idempotency(o) })) as never,
    sendMessage: async (body, o) => unwrap(await rest.POST('/v1/messages', { body, headers: idempotency(o) })) as never,
    async uploadFile(file, filename) {
      const body = new FormData();
      body.append('file', file, filename);
      return unwrap(await request('post', '/v1/files', { body })) as never;
    },
    async *paginate(path, params) {
      const p = (params ?? {}) as { query?: Record<string, unknown> };
      let after = p.query?.after;
      for (;;) {
        const page = unwrap(await request('get', path, { params: { ...p, query: { ...p.query, after } } })) as {
          data: never[];
          next_cursor?: string | null;
          has_more: boolean;
        };
        yield* page.data;
        if (!page.has_more || !page.next_cursor) return;
        after = page.next_cursor;
      }
    },
    stream: (o) => streamEvents({ baseUrl, headers, fetch: fetchFn }, o),
    graphql: createGraphqlClients({ baseUrl, headers, fetch: fetchFn }),
  };
}

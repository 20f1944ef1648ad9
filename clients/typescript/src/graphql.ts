import type { ExecutionResult } from 'graphql';
import { type Client as HttpClient, createClient as createHttpClient } from 'graphql-http';
import { type Client as SseClient, createClient as createSseClient } from 'graphql-sse';

export interface GraphqlClients {
  /** graphql-http's client at POST /graphql (queries and mutations). */
  http: HttpClient;
  /** graphql-sse's client (distinct connections mode) for `subscription { eventStream … }`. */
  sse: SseClient;
  /** One query or mutation; resolves to its execution result (`data`, `errors`). */
  query<Data = Record<string, unknown>>(query: string, variables?: Record<string, unknown>): Promise<ExecutionResult<Data>>;
  /** A subscription's results as an async iterator; `break` ends it. */
  subscribe<Data = Record<string, unknown>>(
    query: string,
    variables?: Record<string, unknown>,
  ): AsyncIterableIterator<ExecutionResult<Data>>;
}

export function createGraphqlClients(connection: {
  baseUrl: string;
  headers: Record<string, string>;
  fetch: typeof globalThis.fetch;
}): GraphqlClients {
  const url = `${connection.baseUrl}/graphql`;
  const http = createHttpClient({ url, headers: connection.headers, fetchFn: connection.fetch });
  const sse = createSseClient({ url, headers: connection.headers, fetchFn: connection.fetch });
  return {
    http,
    sse,
    query: <Data>(query: string, variables?: Record<string, unknown>) =>
      new Promise<ExecutionResult<Data>>((resolve, reject) => {
        let result: ExecutionResult<Data> | undefined;
        http.subscribe<Data>(
          { query, variables },
          {
            next: (r) => {
              result = r as ExecutionResult<Data>;
            },
            error: reject,
            complete: () => (result ? resolve(result) : reject(new Error('The GraphQL endpoint answered no result'))),
          },
        );
      }),
    subscribe: <Data>(query: string, variables?: Record<string, unknown>) =>
      sse.iterate<Data>({ query, variables }) as AsyncIterableIterator<ExecutionResult<Data>>,
  };
}

import { GraphQLError } from 'graphql';
import type { Principal } from '../auth/api-keys.js';
import { requireScope } from '../auth/api-keys.js';
import type { Scope } from '../auth/scopes.js';
import type { Deps } from '../deps.js';
import { AppError, isUnavailable, unavailable } from '../errors.js';
import type { WebServices } from '../http/web-services.js';

export interface GqlContext {
  [key: PropertyKey]: unknown;
  deps: Deps;
  web: WebServices;
  principal: Principal;
  /** Throws the FORBIDDEN error unless the key has the scope; returns the principal. */
  need(scope: Scope): Principal;
}

export function createContext(deps: Deps, web: WebServices, principal: Principal): GqlContext {
  return {
    deps,
    web,
    principal,
    need(scope) {
      const r = requireScope(principal, scope);
      if (!r.ok) throw AppError.from(r.error);
      return r.value;
    },
  };
}

/**
 * The GraphQL face of the one error table: AppErrors keep their code (and, for payload
 * validation, the path of the first problem); anything else is masked as INTERNAL.
 */
export function formatGraphqlError(err: unknown): GraphQLError {
  const e = err instanceof GraphQLError ? err : new GraphQLError(String((err as Error)?.message ?? err));
  const original =
    e.originalError && !(e.originalError instanceof AppError) && isUnavailable(e.originalError)
      ? unavailable(undefined, e.originalError)
      : e.originalError;
  if (original instanceof AppError) {
    const firstPath = original.details?.find((d) => d.path)?.path;
    return new GraphQLError(original.message, {
      nodes: e.nodes,
      source: e.source,
      positions: e.positions,
      path: e.path,
      extensions: {
        code: original.code,
        ...(firstPath ? { path: firstPath } : {}),
        ...(original.details ? { details: original.details } : {}),
      },
    });
  }
  if (original && !(original instanceof GraphQLError)) {
    return new GraphQLError('Internal error', { nodes: e.nodes, path: e.path, extensions: { code: 'INTERNAL' } });
  }
  if (!e.extensions?.code) {
    return new GraphQLError(e.message, {
      nodes: e.nodes,
      source: e.source,
      positions: e.positions,
      path: e.path,
      extensions: { ...e.extensions, code: 'GRAPHQL_VALIDATION_FAILED' },
    });
  }
  return e;
}

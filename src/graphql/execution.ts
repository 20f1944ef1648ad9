import { execute, getOperationAST, type ExecutionArgs, type ExecutionResult, GraphQLError } from 'graphql';
import { noteWrite, readOnly, replicaFault } from '../replica-reads.js';
import type { GqlContext } from './context.js';

/**
 * Runs a query or mutation over HTTP under the replica rule (src/replica-reads.ts): a query
 * reads from the replica and runs again on the primary when a root field comes back null (a
 * by-id lookup that missed) or a resolver failed for a reason other than the request's own
 * (an AppError); a mutation runs on the primary and marks the application as having written.
 */
export async function executeOperation(args: ExecutionArgs): Promise<ExecutionResult> {
  const ctx = args.contextValue as GqlContext;
  const operation = getOperationAST(args.document, args.operationName)?.operation;
  if (operation === 'mutation') {
    try {
      return await execute(args);
    } finally {
      await noteWrite(ctx.deps, ctx.principal.appId);
    }
  }
  if (operation !== 'query') return execute(args);
  return readOnly(
    ctx.deps,
    ctx.principal.appId,
    async (deps) => {
      const result = await execute({ ...args, contextValue: { ...ctx, deps } });
      if (deps.sql === ctx.deps.sql) return result;
      // A fault of the pool read from is thrown so the rule can tell it and run again on the primary.
      const fault = result.errors?.map(thrownBy).find((e) => e !== undefined && replicaFault(e) !== undefined);
      if (fault) throw fault;
      return result;
    },
    { missed: (result) => Object.values(result.data ?? {}).some((value) => value === null) },
  );
}

/** What a resolver threw, when an error came from one (not GraphQL's own checks). */
const thrownBy = (err: GraphQLError): unknown => (err.originalError instanceof GraphQLError ? undefined : (err.originalError ?? undefined));

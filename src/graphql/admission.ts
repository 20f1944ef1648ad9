import {
  GraphQLError,
  Kind,
  getOperationAST,
  parse,
  validate,
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type SelectionSetNode,
} from 'graphql';
import { unstorableError } from '../storable-text.js';
import { tooComplex, validationRules, type GraphqlLimits } from './limits.js';

/** What a client sends: the GraphQL-over-HTTP request parameters. */
export interface OperationRequest {
  query: string;
  variables?: Record<string, unknown> | null;
  operationName?: string | null;
}

export type Admission =
  | { ok: true; document: DocumentNode; operation: OperationDefinitionNode; points: number }
  | { ok: false; errors: readonly GraphQLError[] };

/**
 * Decides whether a document may run, before anything does: parsed within the token limit,
 * validated by the one rule list (src/graphql/limits.ts), its operation selected. Both GraphQL
 * endpoints call this, so a limit cannot hold on one and not the other. `points` is what the
 * operation spends of the application's rate limit (`operationPoints`).
 */
export function admitOperation(schema: GraphQLSchema, limits: GraphqlLimits, request: OperationRequest): Admission {
  // A POST body was checked at the door with the rest of the JSON; GET's variables arrive as
  // query-string text parsed by the GraphQL handler, so the same entrance check runs here.
  const unstorable = unstorableError(request.variables ?? undefined, ['variables'], limits.maxJsonDepth);
  if (unstorable) return { ok: false, errors: [new GraphQLError(unstorable.message, { originalError: unstorable })] };
  let document: DocumentNode;
  try {
    document = parse(request.query, { maxTokens: limits.maxTokens });
  } catch (err) {
    if (!(err instanceof GraphQLError)) throw err;
    // graphql-js reports the token limit as a syntax error ("more that N tokens"); it is a size refusal.
    return {
      ok: false,
      errors: [/more tha[nt] \d+ tokens/.test(err.message) ? tooComplex(`Document has more than ${limits.maxTokens} tokens`) : err],
    };
  }
  const rules = validationRules(limits, { variables: request.variables ?? undefined, operationName: request.operationName ?? undefined });
  const errors = validate(schema, document, rules);
  if (errors.length) return { ok: false, errors };
  const operation = getOperationAST(document, request.operationName);
  if (!operation)
    return { ok: false, errors: [new GraphQLError('Name the operation to run with `operationName`, one of the document’s operations')] };
  return { ok: true, document, operation, points: operationPoints(document, operation) };
}

/**
 * Rate-limit points of an operation: a mutation spends one per top-level field it runs (300
 * aliased `createEvent` are 300 writes), a query one, a subscription none (a stream, capped by
 * STREAM_MAX_PER_APP like GET /events/stream). Root fields are counted as execution merges
 * them, by response name, each fragment walked once; `__typename` is free.
 */
function operationPoints(document: DocumentNode, operation: OperationDefinitionNode): number {
  if (operation.operation === 'subscription') return 0;
  if (operation.operation === 'query') return 1;
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const def of document.definitions) if (def.kind === Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
  const keys = new Set<string>();
  const walked = new Set<string>();
  const collect = (set: SelectionSetNode) => {
    for (const sel of set.selections) {
      if (sel.kind === Kind.FIELD) {
        if (sel.name.value !== '__typename') keys.add(sel.alias?.value ?? sel.name.value);
      } else if (sel.kind === Kind.INLINE_FRAGMENT) collect(sel.selectionSet);
      else if (!walked.has(sel.name.value)) {
        walked.add(sel.name.value);
        const fragment = fragments.get(sel.name.value);
        if (fragment) collect(fragment.selectionSet);
      }
    }
  };
  collect(operation.selectionSet);
  return Math.max(1, keys.size);
}

import { maxAliasesRule } from '@escape.tech/graphql-armor-max-aliases';
import { maxDepthRule } from '@escape.tech/graphql-armor-max-depth';
import { maxDirectivesRule } from '@escape.tech/graphql-armor-max-directives';
import {
  GraphQLError,
  specifiedRules,
  type ASTVisitor,
  type OperationDefinitionNode,
  type ValidationContext,
  type ValidationRule,
} from 'graphql';
import { createComplexityRule, simpleEstimator, type ComplexityEstimator } from 'graphql-query-complexity';
import type { Config } from '../config.js';
import { storableLiterals } from '../storable-text.js';

/** The limits every GraphQL document meets, whichever endpoint it reaches (src/config.ts). */
export interface GraphqlLimits {
  maxDepth: number;
  maxAliases: number;
  maxDirectives: number;
  maxTokens: number;
  maxCost: number;
  /** Deepest nesting in the variables and inline values (JSON_MAX_DEPTH, as for every JSON entrance). */
  maxJsonDepth: number;
}

/** The GraphQL limits of this process, read from its config (GRAPHQL_MAX_*). */
export const graphqlLimits = (config: Config): GraphqlLimits => ({
  maxDepth: config.GRAPHQL_MAX_DEPTH,
  maxAliases: config.GRAPHQL_MAX_ALIASES,
  maxDirectives: config.GRAPHQL_MAX_DIRECTIVES,
  maxTokens: config.GRAPHQL_MAX_TOKENS,
  maxCost: config.GRAPHQL_MAX_COST,
  maxJsonDepth: config.JSON_MAX_DEPTH,
});

/**
 * Fields the cost estimate walks before giving up: a document whose fragments expand past this
 * (each spread is walked at every use) is refused as too complex rather than walked further.
 */
const MAX_COST_NODES = 10_000;

/** A document past a limit: refused with this code, before anything runs. */
export const tooComplex = (message: string): GraphQLError => new GraphQLError(message, { extensions: { code: 'QUERY_TOO_COMPLEX' } });

// graphql-armor reports through callbacks; its own error reads "Syntax Error: …", which this is not.
const armor = (n: number) => ({
  n,
  exposeLimits: true,
  propagateOnRejection: false,
  onReject: [
    (ctx: ValidationContext | null, err: GraphQLError) => ctx?.reportError(tooComplex(err.message.replace(/^Syntax Error: /, ''))),
  ],
});

/**
 * A list field costs its `first` (the schema's default when absent, a variable's value when
 * given one) times its selection; any other field costs 1 plus its selection.
 */
const pageEstimator: ComplexityEstimator = ({ args, childComplexity }) =>
  typeof args.first === 'number' ? 1 + Math.max(1, args.first) * Math.max(1, childComplexity) : undefined;

/**
 * Estimated cost of the operation with the request's variables (graphql-query-complexity),
 * refused past `maxCost`. The estimate walks fragments at each use, so its walk is capped
 * (MAX_COST_NODES); a document past the cap is refused like one past the cost.
 */
function costLimit(maxCost: number, variables: Record<string, unknown> | undefined, operationName: string | undefined): ValidationRule {
  return (context: ValidationContext): ASTVisitor => {
    const estimate = createComplexityRule({
      maximumComplexity: maxCost,
      variables: variables ?? {},
      operationName,
      maxQueryNodes: MAX_COST_NODES,
      estimators: [pageEstimator, simpleEstimator({ defaultComplexity: 1 })],
      createError: (max, actual) => tooComplex(`Query cost ${actual} exceeds the limit of ${max}`),
    })(context);
    let gaveUp = false;
    return {
      OperationDefinition: {
        enter(node: OperationDefinitionNode) {
          try {
            estimate.onOperationDefinitionEnter(node);
          } catch (err) {
            if (!(err instanceof GraphQLError)) throw err;
            gaveUp = true;
            context.reportError(tooComplex(`Query too complex to estimate: ${err.message}`));
          }
        },
        leave(node: OperationDefinitionNode) {
          if (!gaveUp) estimate.onOperationDefinitionLeave(node);
        },
      },
    };
  };
}

/**
 * The one list of validation rules of both GraphQL endpoints: the specification's rules, depth
 * / alias / directive counts that walk each fragment once (graphql-armor), the cost estimate
 * and the entrance check of JSON input on inline values. Token count is the parser's (`parseOptions`).
 */
export function validationRules(
  limits: GraphqlLimits,
  request: { variables?: Record<string, unknown>; operationName?: string },
): ValidationRule[] {
  return [
    ...specifiedRules,
    maxDepthRule({ ...armor(limits.maxDepth), flattenFragments: true, ignoreIntrospection: true }),
    maxAliasesRule(armor(limits.maxAliases)),
    maxDirectivesRule(armor(limits.maxDirectives)),
    costLimit(limits.maxCost, request.variables, request.operationName),
    storableLiterals(limits.maxJsonDepth),
  ];
}

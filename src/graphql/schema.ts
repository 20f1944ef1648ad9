import {
  buildSchema,
  type GraphQLScalarType,
  Kind,
  isObjectType,
  type GraphQLFieldResolver,
  type GraphQLSchema,
  type ValueNode,
} from 'graphql';
import type { GqlContext } from './context.js';
import { baseModule } from './base.js';
import { eventsModule } from './events.js';
import { connectionsModule } from './connections.js';
import { messagesModule } from './messages.js';
import { webhooksModule } from './webhooks.js';
import { usersModule } from './users.js';
import { conversationsModule } from './conversations.js';
import { eventStreamModule } from '../stream/graphql.js';

// biome-ignore lint/suspicious/noExplicitAny: sources vary per type; each resolver annotates its own.
type FieldResolver = GraphQLFieldResolver<any, GqlContext, any>;
/** Resolvers per type: plain field resolvers, or `{subscribe, resolve}` on Subscription fields. */
export type Resolvers = Record<string, Record<string, FieldResolver | { subscribe: FieldResolver; resolve?: FieldResolver }>>;

/** A slice of the API: its SDL (using `extend type Query` etc.) and its resolvers. */
export interface GraphqlModule {
  typeDefs: string;
  resolvers: Resolvers;
}

/**
 * Every module of the GraphQL API. Each resource adds its own module here; REST and GraphQL
 * call the same domain functions underneath.
 */
const MODULES: GraphqlModule[] = [
  baseModule,
  eventsModule,
  connectionsModule,
  messagesModule,
  webhooksModule,
  usersModule,
  conversationsModule,
  eventStreamModule,
];

export function createSchema(modules: GraphqlModule[] = MODULES): GraphQLSchema {
  const schema = buildSchema(modules.map((m) => m.typeDefs).join('\n'));
  for (const m of modules) attachResolvers(schema, m.resolvers);
  attachScalars(schema);
  return schema;
}

function attachResolvers(schema: GraphQLSchema, resolvers: Resolvers): void {
  for (const [typeName, fields] of Object.entries(resolvers)) {
    const type = schema.getType(typeName);
    if (!type || !isObjectType(type)) throw new Error(`resolvers for unknown type ${typeName}`);
    const defined = type.getFields();
    for (const [fieldName, r] of Object.entries(fields)) {
      const field = defined[fieldName];
      if (!field) throw new Error(`resolver for unknown field ${typeName}.${fieldName}`);
      if (typeof r === 'function') field.resolve = r;
      else {
        field.subscribe = r.subscribe;
        field.resolve = r.resolve ?? ((v: unknown) => v);
      }
    }
  }
}

function literalToJs(ast: ValueNode): unknown {
  switch (ast.kind) {
    case Kind.STRING:
    case Kind.BOOLEAN:
      return ast.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(ast.value);
    case Kind.OBJECT:
      return Object.fromEntries(ast.fields.map((f) => [f.name.value, literalToJs(f.value)]));
    case Kind.LIST:
      return ast.values.map(literalToJs);
    case Kind.NULL:
      return null;
    default:
      return undefined;
  }
}

/** JSON and DateTime behave as their names say; buildSchema leaves custom scalars as identity. */
function attachScalars(schema: GraphQLSchema): void {
  const json = schema.getType('JSON') as GraphQLScalarType | undefined;
  if (json) {
    json.parseLiteral = (ast) => literalToJs(ast);
    json.parseValue = (v) => v;
    json.serialize = (v) => v;
  }
  const dt = schema.getType('DateTime') as GraphQLScalarType | undefined;
  if (dt) {
    // Ledger times are ISO strings with microseconds: passed through so no precision is lost.
    dt.serialize = (v) => (v instanceof Date ? v.toISOString() : v);
    dt.parseValue = (v) => {
      const d = new Date(String(v));
      if (Number.isNaN(d.getTime())) throw new TypeError('DateTime must be an ISO 8601 string');
      return d;
    };
    dt.parseLiteral = (ast) => (ast.kind === Kind.STRING ? dt.parseValue(ast.value) : undefined);
  }
}

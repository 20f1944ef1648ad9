import type { GraphqlModule } from './schema.js';

export const baseModule: GraphqlModule = {
  typeDefs: /* GraphQL */ `
    "Arbitrary JSON value."
    scalar JSON
    "ISO 8601 date-time."
    scalar DateTime

    type Application {
      id: ID!
      name: String!
      createdAt: DateTime!
    }

    "A query document spends one request of the application's rate limit. A document past the depth, alias, directive, token or estimated-cost limit is refused before it runs (QUERY_TOO_COMPLEX); a list field costs its \`first\` times its selection."
    type Query {
      "The application the API key belongs to."
      application: Application!
    }

    "Each top-level field of a mutation document spends one request of the application's rate limit; a document that does not fit in what is left is refused whole (RATE_LIMITED)."
    type Mutation {
      "No-op; lets modules extend Mutation."
      _noop: Boolean
    }
  `,
  resolvers: {
    Query: {
      application: async (_root, _args, ctx) => {
        const [row] = await ctx.deps.sql<{ id: string; name: string; created_at: Date }[]>`
          SELECT id, name, created_at FROM applications WHERE id = ${ctx.principal.appId}`;
        return { id: row.id, name: row.name, createdAt: row.created_at };
      },
    },
    Mutation: { _noop: () => null },
  },
};

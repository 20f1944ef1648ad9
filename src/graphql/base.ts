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

    type Query {
      "The application the API key belongs to."
      application: Application!
    }

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

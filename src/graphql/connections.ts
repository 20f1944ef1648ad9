import { unwrap } from '../errors.js';
import {
  createConnection,
  createConnectionInput,
  deleteConnection,
  listConnections,
  updateConnection,
  updateConnectionInput,
  type PublicConnection,
} from '../connections/connections.js';
import { parseInput } from './results.js';
import { PLATFORM_NAMES } from '../platforms/types.js';
import type { GqlContext } from './context.js';
import type { GraphqlModule } from './schema.js';

const toNode = (c: PublicConnection) => ({
  id: c.id,
  name: c.name,
  platformName: c.platform_name,
  config: c.config,
  webhookUrl: c.webhook_url,
  status: c.status,
  health: {
    status: c.health.status.toUpperCase(),
    lastSuccessAt: c.health.last_success_at,
    lastErrorAt: c.health.last_error_at,
    lastError: c.health.last_error,
    lastInboundAt: c.health.last_inbound_at,
    consecutiveFailures: c.health.consecutive_failures,
  },
  createdAt: c.created_at,
});

export const connectionsModule: GraphqlModule = {
  typeDefs: /* GraphQL */ `
    enum PlatformName { ${PLATFORM_NAMES.join(' ')} }
    enum ConnectionStatus { ACTIVE DISABLED }
    enum HealthStatus { GREEN RED UNKNOWN }

    type ConnectionHealth {
      status: HealthStatus!
      lastSuccessAt: DateTime
      lastErrorAt: DateTime
      lastError: String
      "When the platform last delivered something to this connection."
      lastInboundAt: DateTime
      consecutiveFailures: Int!
    }

    type PlatformConnection {
      id: ID!
      name: String!
      platformName: PlatformName!
      "Secrets are masked."
      config: JSON!
      webhookUrl: String!
      status: ConnectionStatus!
      health: ConnectionHealth!
      createdAt: DateTime!
    }

    extend type Query {
      platformConnections: [PlatformConnection!]!
    }

    extend type Mutation {
      createPlatformConnection(platformName: PlatformName!, name: String!, config: JSON!): PlatformConnection!
      updatePlatformConnection(id: ID!, name: String, status: ConnectionStatus, config: JSON): PlatformConnection!
      deletePlatformConnection(id: ID!): Boolean!
    }
  `,
  resolvers: {
    Query: {
      platformConnections: async (_r, _a, ctx: GqlContext) => (await listConnections(ctx.deps, ctx.need('admin').appId)).map(toNode),
    },
    Mutation: {
      createPlatformConnection: async (_r, args: { platformName: string; name: string; config: unknown }, ctx: GqlContext) => {
        const { appId } = ctx.need('admin');
        const input = parseInput(createConnectionInput, { platform_name: args.platformName, name: args.name, config: args.config });
        return toNode(unwrap(await createConnection(ctx.deps, appId, input)));
      },
      updatePlatformConnection: async (_r, args: { id: string; name?: string; status?: string; config?: unknown }, ctx: GqlContext) => {
        const { appId } = ctx.need('admin');
        const patch = parseInput(
          updateConnectionInput,
          Object.fromEntries(Object.entries({ name: args.name, status: args.status, config: args.config }).filter(([, v]) => v != null)),
        );
        return toNode(unwrap(await updateConnection(ctx.deps, appId, args.id, patch)));
      },
      deletePlatformConnection: async (_r, args: { id: string }, ctx: GqlContext) =>
        unwrap(await deleteConnection(ctx.deps, ctx.need('admin').appId, args.id)),
    },
  },
};

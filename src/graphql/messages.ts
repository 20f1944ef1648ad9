import { unwrap } from '../errors.js';
import { sendFailure } from '../http/messages.js';
import { sendMessageInput, submitMessage } from '../messages/messages.js';
import type { GqlContext } from './context.js';
import { parseInput } from './results.js';
import type { GraphqlModule } from './schema.js';

export const messagesModule: GraphqlModule = {
  typeDefs: /* GraphQL */ `
    type SendStatus {
      success: Boolean!
      message: String!
      externalMessageId: String
    }
    type SendMessageResult {
      id: ID!
      status: SendStatus!
    }
    extend type Mutation {
      sendMessage(platformConnectionId: ID!, toExternalId: String!, message: String!, fileIds: [ID!], parseMode: String, subject: String): SendMessageResult!
    }
  `,
  resolvers: {
    Mutation: {
      sendMessage: async (
        _r,
        a: {
          platformConnectionId: string;
          toExternalId: string;
          message: string;
          fileIds?: string[];
          parseMode?: string;
          subject?: string;
        },
        ctx: GqlContext,
      ) => {
        const { appId } = ctx.need('events:write');
        const input = parseInput(sendMessageInput, {
          platform_connection_id: a.platformConnectionId,
          to_external_id: a.toExternalId,
          message: a.message,
          ...(a.fileIds ? { file_ids: a.fileIds } : {}),
          ...(a.parseMode ? { parse_mode: a.parseMode } : {}),
          ...(a.subject ? { subject: a.subject } : {}),
        });
        const m = unwrap(await submitMessage(ctx.deps, ctx.web, appId, input));
        if (m.status === 'failed') throw sendFailure(m);
        return {
          id: m.id,
          status: {
            success: m.status === 'sent',
            message: m.status === 'sent' ? 'sent' : 'queued',
            externalMessageId: m.external_message_id,
          },
        };
      },
    },
  },
};

import { z } from 'zod';
import { unwrap } from '../errors.js';
import { sandboxMessageInput, simulateSandboxMessage } from '../inbound/sandbox-messages.js';
import type { Api } from './api.js';

export function registerSandboxRoutes(api: Api): void {
  api.route({
    method: 'post',
    path: '/v1/platform-connections/:id/sandbox/messages',
    operationId: 'simulateSandboxMessage',
    summary: 'Act as the end user of a sandbox connection: send a message, a reply, media or a reaction',
    description: [
      'Only for connections whose `platform_name` is `SANDBOX`. The delivery is queued exactly as a real platform webhook is',
      '(same inbound queue, dedupe key and worker): the end user and the conversation are created or found, media is stored',
      'as a file, and `message.inbound` (or `message.reaction`) is written to the ledger, then streamed and delivered to',
      'matching webhook subscriptions, a moment after this answer. `event_id` is the id that event will have.',
      'Repeating a `message_id` is a redelivery and records nothing new. A message needs `text` or `media`;',
      '`reaction` stands alone. `reply_to` and `reaction.message_id` take the `external_message_id` of an earlier message:',
      "the user's own, or one sent to them (`POST /v1/messages`).",
    ].join(' '),
    scope: 'events:write',
    params: z.object({ id: z.string() }),
    body: sandboxMessageInput,
    responses: {
      202: {
        description: 'Queued for the inbound worker',
        schema: z.object({
          external_message_id: z.string().describe("The platform's id of the message or reaction (`message_id`, or the one made up)"),
          event_id: z.string().describe('The id of the message.inbound (or message.reaction) event once recorded'),
        }),
      },
    },
    errors: ['PLATFORM_CONNECTION_NOT_FOUND', 'CONFLICT', 'CONNECTION_DISABLED'],
    handler: async ({ deps, principal, params, body }) => ({
      status: 202,
      body: unwrap(await simulateSandboxMessage(deps, principal.appId, params.id, body)),
    }),
  });
}

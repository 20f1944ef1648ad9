import { z } from 'zod';
import { AppError, unwrap } from '../errors.js';
import { getMessage, sendMessageInput, submitMessage, type MessageRow, type SubmittedMessage } from '../messages/messages.js';
import type { Api } from './api.js';
import { IDEMPOTENCY_KEY } from './openapi.js';
import type { RouteContext } from './routes.js';

const messageOut = z.object({
  id: z.string(),
  status: z.enum(['queued', 'sending', 'sent', 'failed']),
  external_message_id: z.string().nullable().optional(),
  created_at: z.string(),
});

/** GET /v1/messages/:id: the send's state, where it went, and why it failed when it did. */
const messageDetailOut = messageOut.extend({
  platform_connection_id: z.string(),
  to_external_id: z.string(),
  error: z
    .object({
      code: z.string(),
      message: z.string(),
      platform_code: z.union([z.string(), z.number()]).optional(),
      platform_message: z.string().optional(),
    })
    .optional()
    .describe('Present when the send failed'),
});

const toRestMessage = (m: MessageRow): z.output<typeof messageDetailOut> => ({
  id: m.id,
  status: m.status,
  external_message_id: m.external_message_id,
  platform_connection_id: m.platform_connection_id,
  to_external_id: m.to_external_id,
  ...(m.error ? { error: m.error } : {}),
  created_at: m.created_at.toISOString(),
});

/** A finally failed send as the error REST and GraphQL answer with. */
export function sendFailure(m: Pick<SubmittedMessage, 'id' | 'error'>): AppError {
  const e = m.error!;
  return new AppError(e.code, e.message, [
    {
      message: e.platform_message ?? e.message,
      platform_code: e.platform_code ?? null,
      platform_message: e.platform_message ?? null,
      message_id: m.id,
    },
  ]);
}

export function registerMessageRoutes(api: Api, { web }: RouteContext): void {
  api.route({
    method: 'post',
    path: '/v1/messages',
    operationId: 'sendMessage',
    description:
      "Queues a message to one recipient through a platform connection. Messages to the same recipient leave in the order they were accepted; the platform's answer is recorded as `message.sent`, or `message.failed` with the platform's error. The answer carries the message's state at that moment (sent, or queued while the platform has not answered within the request's bound). Send an Idempotency-Key to make retries safe.",
    summary: 'Send a message through a platform connection',
    scope: 'events:write',
    body: sendMessageInput,
    headers: [IDEMPOTENCY_KEY],
    responses: {
      201: { description: 'Sent: the platform accepted it', schema: messageOut },
      202: { description: 'Queued: the outcome arrives as message.outbound / message.status events', schema: messageOut },
      422: { description: 'The platform refused it for good; details carry its own code and text' },
    },
    errors: [
      'PLATFORM_CONNECTION_NOT_FOUND',
      'MESSAGE_TOO_LONG',
      'INVALID_RECIPIENT',
      'REPLY_WINDOW_CLOSED',
      'IDEMPOTENCY_CONFLICT',
      // A send that failed for good within the wait answers with the failure's own code (sendFailure).
      'CONNECTION_DISABLED',
      'RECIPIENT_NOT_STARTED',
      'RECIPIENT_BLOCKED',
      'PLATFORM_AUTH_FAILED',
      'PLATFORM_REJECTED',
      'PLATFORM_RATE_LIMITED',
      'PLATFORM_UNAVAILABLE',
      'DELIVERY_UNCERTAIN',
    ],
    async handler({ deps, principal, body, req }) {
      const m = unwrap(await submitMessage(deps, web, principal.appId, body, req.get('idempotency-key')));
      if (m.status === 'failed') throw sendFailure(m);
      if (m.status === 'sent')
        return {
          status: 201,
          body: { id: m.id, status: 'sent', external_message_id: m.external_message_id, created_at: m.created_at.toISOString() },
        };
      return { status: 202, body: { id: m.id, status: 'queued', created_at: m.created_at.toISOString() } };
    },
  });
  api.route({
    method: 'get',
    path: '/v1/messages/:id',
    operationId: 'getMessage',
    description: "The state of a message sent through the API: queued, sent or failed, with the platform's message id or error.",
    summary: 'The state of a sent message',
    scope: 'events:read',
    params: z.object({ id: z.string() }),
    responses: { 200: { description: 'The message', schema: messageDetailOut } },
    errors: ['NOT_FOUND'],
    async handler({ deps, principal, params }) {
      const m = await getMessage(deps, principal.appId, params.id);
      if (!m) throw new AppError('NOT_FOUND', `No message ${params.id}`);
      return { status: 200, body: toRestMessage(m) };
    },
  });
}

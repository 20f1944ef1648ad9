import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { loadConnection } from '../connections/connections.js';
import type { Deps } from '../deps.js';
import { fail, ok, type Result } from '../errors.js';
import { sandboxDelivery, sandboxMedia, type SandboxDelivery } from '../platforms/sandbox/inbound.js';
import { SANDBOX_USER_ID, sandboxUserProblem } from '../platforms/sandbox/send.js';
import { enqueue } from '../queues.js';
import { deliveryJob, ownDelivery } from './delivery-job.js';
import { inboundEventId, reactionEventId } from './records.js';

const platformId = (what: string) =>
  z.string().regex(SANDBOX_USER_ID, `${what}: 1-128 characters of A-Z, a-z, 0-9 and . _ @ + : -, starting with a letter or digit`);

/** What the end user does: a message (text and/or media, maybe a reply) or a reaction. */
export const sandboxMessageInput = z
  .strictObject({
    from: platformId('from')
      .refine((id) => !sandboxUserProblem(id), 'from must not be "sandbox" (the connected account itself)')
      .describe("The end user's id on the sandbox (`ada`); their conversation with the connection is named after it"),
    from_name: z.string().trim().min(1).max(200).optional().describe("The end user's display name"),
    message_id: platformId('message_id')
      .optional()
      .describe(
        "The platform's id of this message or reaction; sending the same id again is a redelivery, recorded once. Default: a new id",
      ),
    text: z.string().max(10_000).optional().describe('The message text (the caption, with media)'),
    media: sandboxMedia
      .refine((m) => (m.content_base64 === undefined) !== (m.url === undefined), 'give exactly one of content_base64 and url')
      .optional()
      .describe('An attachment: its bytes as base64, or a URL the worker fetches; `type` defaults from `mime_type`'),
    reply_to: platformId('reply_to')
      .optional()
      .describe("The platform's id of an earlier message (the user's or one sent to them) this one answers"),
    reaction: z
      .strictObject({
        message_id: platformId('reaction.message_id').describe("The platform's id of the message reacted to"),
        emoji: z.string().min(1).max(64),
        action: z.enum(['added', 'removed']).default('added'),
      })
      .optional()
      .describe('A reaction instead of a message'),
  })
  .superRefine((m, ctx) => {
    if (m.reaction) {
      for (const field of ['text', 'media', 'reply_to'] as const)
        if (m[field] !== undefined) ctx.addIssue({ code: 'custom', path: [field], message: `${field} cannot go with reaction` });
    } else if (!m.text && !m.media) ctx.addIssue({ code: 'custom', path: ['text'], message: 'give text, media or reaction' });
  });

export interface SimulatedDelivery {
  /** The platform's id of the message (or reaction) the end user sent. */
  external_message_id: string;
  /** The id its event (message.inbound or message.reaction) gets once the inbound worker records it. */
  event_id: string;
}

/**
 * The end user of a sandbox connection writes or reacts: the delivery is built in the
 * sandbox's own inbound shape and queued as the receiver queues a real platform's webhook —
 * same job, same dedupe key, same worker — so dedupe, normalisation, identity, conversations,
 * the ledger, webhooks and streams all behave as they do for real traffic. Only the
 * signature check is missing, as there is no platform to sign.
 */
export async function simulateSandboxMessage(
  deps: Deps,
  appId: string,
  connectionId: string,
  input: z.output<typeof sandboxMessageInput>,
  now = Date.now(),
): Promise<Result<SimulatedDelivery>> {
  const conn = await loadConnection(deps, appId, connectionId);
  if (!conn) return fail('PLATFORM_CONNECTION_NOT_FOUND', `Platform connection ${connectionId} not found`);
  if (conn.platform !== 'SANDBOX')
    return fail(
      'CONFLICT',
      `Platform connection ${conn.id} is a ${conn.platform} connection: only SANDBOX connections take simulated messages`,
    );
  if (conn.status !== 'ACTIVE') return fail('CONNECTION_DISABLED', `Platform connection ${conn.id} is disabled`);

  const id = input.message_id ?? `in-${randomUUID()}`;
  const from = { id: input.from, ...(input.from_name ? { name: input.from_name } : {}) };
  const timestamp = new Date(now).toISOString();
  const delivery: SandboxDelivery = input.reaction
    ? {
        type: 'reaction',
        id,
        from,
        message_id: input.reaction.message_id,
        emoji: input.reaction.emoji,
        action: input.reaction.action,
        timestamp,
      }
    : {
        type: 'message',
        id,
        from,
        text: input.text ?? '',
        ...(input.media ? { media: input.media } : {}),
        ...(input.reply_to ? { reply_to: input.reply_to } : {}),
        timestamp,
      };
  const job = deliveryJob(conn, ownDelivery(Buffer.from(JSON.stringify(sandboxDelivery.parse(delivery))), now));
  if (!job) throw new Error('a sandbox delivery the sandbox does not read');
  await enqueue(deps.queues, 'inbound', job);
  const eventId =
    delivery.type === 'reaction'
      ? reactionEventId(conn.id, {
          targetExternalMessageId: delivery.message_id,
          sender: { externalId: from.id },
          emoji: delivery.emoji,
          action: delivery.action,
          occurredAt: timestamp,
        })
      : inboundEventId(conn.id, id);
  return ok({ external_message_id: id, event_id: eventId });
}

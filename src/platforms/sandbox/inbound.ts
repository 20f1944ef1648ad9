import { z } from 'zod';
import { MalformedPayloadError } from '../../errors.js';
import { ok, parseJson, type MessageType } from '../inbound-common.js';
import type { InboundHalf, InboundMedia, NormalisedRecord, PlatformParty } from '../types.js';
import { SANDBOX_ACCOUNT_ID, SANDBOX_USER_ID } from './send.js';

const id = z.string().regex(SANDBOX_USER_ID);
const party = z.strictObject({ id, name: z.string().min(1).max(200).optional() });
const messageTypes = ['image', 'video', 'audio', 'voice', 'document', 'sticker'] as const;

/** Media inside a sandbox delivery: its bytes (base64) or a URL fetched like any platform's media. */
export const sandboxMedia = z.strictObject({
  content_base64: z.base64().optional(),
  url: z.url({ protocol: /^https?$/ }).optional(),
  mime_type: z.string().regex(/^[\w.+-]+\/[\w.+-]+$/, 'mime_type must be a media type such as image/png'),
  filename: z.string().min(1).max(255).optional(),
  type: z.enum(messageTypes).optional(),
});
export type SandboxMedia = z.infer<typeof sandboxMedia>;

/**
 * The sandbox's own inbound shape: what POST /v1/platform-connections/:id/sandbox/messages
 * queues, what the simulated status reports carry, and what the connection's webhook_url
 * accepts (as a real platform's webhook would post it). `id` is the delivery's platform id,
 * the dedupe key: the same id twice is one delivery.
 */
export const sandboxDelivery = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('message'),
    id,
    from: party,
    text: z.string().max(10_000),
    media: sandboxMedia.optional(),
    reply_to: id.optional(),
    timestamp: z.iso.datetime({ offset: true }),
  }),
  z.strictObject({
    type: z.literal('reaction'),
    id,
    from: party,
    message_id: id,
    emoji: z.string().min(1).max(64),
    action: z.enum(['added', 'removed']),
    timestamp: z.iso.datetime({ offset: true }),
  }),
  z.strictObject({
    type: z.literal('status'),
    id: z.string().min(1).max(300),
    message_id: id,
    to: id,
    status: z.enum(['delivered', 'read']),
    timestamp: z.iso.datetime({ offset: true }),
  }),
]);
export type SandboxDelivery = z.infer<typeof sandboxDelivery>;

/** A media type's message kind when the delivery does not name one. */
function kindOf(media: SandboxMedia): MessageType {
  if (media.type) return media.type;
  const [top] = media.mime_type.toLowerCase().split('/');
  return top === 'image' ? 'image' : top === 'video' ? 'video' : top === 'audio' ? 'audio' : 'document';
}

function mediaRecord(media: SandboxMedia, kind: MessageType): InboundMedia {
  return {
    ...(media.content_base64 !== undefined ? { inlineBase64: media.content_base64 } : {}),
    ...(media.url ? { url: media.url } : {}),
    mimeType: media.mime_type,
    ...(media.filename ? { filename: media.filename } : {}),
    ...(kind === 'audio' || kind === 'voice' ? { isAudio: true } : {}),
  };
}

const partyOf = (p: { id: string; name?: string }): PlatformParty => ({ externalId: p.id, ...(p.name ? { name: p.name } : {}) });

function parse(raw: Buffer): SandboxDelivery {
  const parsed = sandboxDelivery.safeParse(parseJson(raw));
  if (!parsed.success) throw new MalformedPayloadError('SANDBOX', `not a sandbox delivery: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}

/** One sandbox delivery as normalised records: every chat is one to one, named after the end user. */
function records(d: SandboxDelivery): NormalisedRecord[] {
  switch (d.type) {
    case 'message': {
      const kind = d.media ? kindOf(d.media) : 'text';
      return [
        {
          kind: 'message',
          externalMessageId: d.id,
          conversation: { externalId: d.from.id },
          sender: partyOf(d.from),
          recipient: { externalId: SANDBOX_ACCOUNT_ID },
          message: {
            text: d.text,
            type: kind,
            ...(d.media ? { media: mediaRecord(d.media, kind), ...(d.text ? { caption: d.text } : {}) } : {}),
          },
          ...(d.reply_to ? { replyTo: d.reply_to } : {}),
          occurredAt: d.timestamp,
        },
      ];
    }
    case 'reaction':
      return [
        {
          kind: 'reaction',
          targetExternalMessageId: d.message_id,
          emoji: d.emoji,
          action: d.action,
          sender: partyOf(d.from),
          conversation: { externalId: d.from.id },
          occurredAt: d.timestamp,
        },
      ];
    case 'status':
      return [
        { kind: 'status', externalMessageId: d.message_id, status: d.status, recipient: { externalId: d.to }, occurredAt: d.timestamp },
      ];
  }
}

/**
 * Signature-free: the sandbox is no one's account, and its deliveries come from the
 * service's own endpoint (or whoever holds the connection's webhook URL and its secret).
 */
export const sandboxInbound: InboundHalf = {
  verify: () => ok,
  dedupeKey(req) {
    const parsed = sandboxDelivery.safeParse(parseJson(req.rawBody));
    return parsed.success ? parsed.data.id : undefined;
  },
  normalise: ({ rawBody }) => records(parse(rawBody)),
};

/** The simulated end user's device reporting one sent message delivered, then read. */
export function statusReports(
  config: { delivered_after_ms?: number; read_after_ms?: number },
  sent: { externalMessageId: string; to: string; sentAt: number },
  defaults: { delivered: number; read: number },
): { delayMs: number; rawBody: Buffer }[] {
  const report = (status: 'delivered' | 'read', delayMs: number) => ({
    delayMs,
    rawBody: Buffer.from(
      JSON.stringify({
        type: 'status',
        id: `status:${sent.externalMessageId}:${status}`,
        message_id: sent.externalMessageId,
        to: sent.to,
        status,
        timestamp: new Date(sent.sentAt + delayMs).toISOString(),
      } satisfies SandboxDelivery),
    ),
  });
  return [report('delivered', config.delivered_after_ms ?? defaults.delivered), report('read', config.read_after_ms ?? defaults.read)];
}

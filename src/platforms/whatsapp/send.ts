import { baseUrl } from '../http-client.js';
import { unexpectedAnswer } from '../http-errors.js';
import { GRAPH_BASE, GRAPH_VERSION, graphCall } from '../meta-graph.js';
import { multipartOf } from '../multipart.js';
import { sendHalf, type OutboundFile, type OutboundMessage, type SendContext, type SendOutcome } from '../types.js';
import { WHATSAPP_SECRETS, whatsappConfig, type WhatsappConfig } from './config.js';

/**
 * WhatsApp takes the E.164 number with or without its plus: inbound messages name senders
 * by `wa_id`, the digits alone, and a reply to that id must work.
 */
function whatsappNumber(to: string): string | undefined {
  return /^\+?[1-9]\d{6,14}$/.test(to)
    ? undefined
    : `"${to}" is not a phone number in international form (e.g. +14155550123 or 14155550123)`;
}

const WHATSAPP_TEXT_LIMIT = 4096;
const CAPTION_LIMIT = 1024;

interface MessagesAnswer {
  messaging_product?: string;
  contacts?: { input?: string; wa_id?: string }[];
  messages?: { id?: string }[];
}

type MediaType = 'image' | 'video' | 'audio' | 'document';

/** The WhatsApp message type a file goes out as (WhatsApp's supported media types; anything else is a document). */
function mediaTypeOf(file: OutboundFile): MediaType {
  const mime = file.mimeType.toLowerCase();
  if (mime === 'image/jpeg' || mime === 'image/png') return 'image';
  if (mime === 'video/mp4' || mime === 'video/3gpp') return 'video';
  if (['audio/aac', 'audio/amr', 'audio/mpeg', 'audio/mp4', 'audio/ogg'].includes(mime)) return 'audio';
  return 'document';
}

function urls(config: WhatsappConfig, ctx: SendContext) {
  const root = `${baseUrl(config, ctx, GRAPH_BASE)}/${config.api_version ?? GRAPH_VERSION}/${config.phone_number_id}`;
  return { messages: `${root}/messages`, media: `${root}/media` };
}

async function postMessage(config: WhatsappConfig, ctx: SendContext, to: string, content: Record<string, unknown>): Promise<SendOutcome> {
  const r = await graphCall<MessagesAnswer>('WhatsApp', {
    url: urls(config, ctx).messages,
    token: config.access_token,
    json: { messaging_product: 'whatsapp', recipient_type: 'individual', to, ...content },
    timeoutMs: ctx.timeoutMs,
    guarded: ctx.guarded,
  });
  if (!r.ok) return r;
  const id = r.body.messages?.[0]?.id;
  if (!id) return { ok: false, error: unexpectedAnswer('WhatsApp', 200) };
  const waId = r.body.contacts?.[0]?.wa_id;
  return { ok: true, externalMessageId: id, ...(waId ? { recipientId: waId } : {}) };
}

/**
 * Text as a `text` message; files uploaded to the number's media store first (`/media`),
 * then sent by media id, the text riding as the first caption when the type takes one.
 */
async function send(config: WhatsappConfig, m: OutboundMessage, ctx: SendContext): Promise<SendOutcome> {
  const files = m.files ?? [];
  const captionable = files.length > 0 && mediaTypeOf(files[0]) !== 'audio' && m.text.length <= CAPTION_LIMIT;
  let first: SendOutcome | undefined;
  if (m.text.length > 0 && !captionable) {
    first = await postMessage(config, ctx, m.to, { type: 'text', text: { preview_url: false, body: m.text } });
    if (!first.ok) return first;
  }
  for (const [i, file] of files.entries()) {
    const type = mediaTypeOf(file);
    const upload = await graphCall<{ id?: string }>('WhatsApp', {
      url: urls(config, ctx).media,
      token: config.access_token,
      multipart: multipartOf({ messaging_product: 'whatsapp', type: file.mimeType }, [['file', file]]),
      timeoutMs: ctx.timeoutMs,
      guarded: ctx.guarded,
    });
    if (!upload.ok) return upload;
    if (!upload.body.id) return { ok: false, error: unexpectedAnswer('WhatsApp', 200) };
    const media: Record<string, unknown> = { id: upload.body.id };
    if (i === 0 && captionable && m.text.length > 0) media.caption = m.text;
    if (type === 'document') media.filename = file.filename;
    const sent = await postMessage(config, ctx, m.to, { type, [type]: media });
    if (!sent.ok) return sent;
    first ??= sent;
  }
  return first!;
}

export const whatsappSend = sendHalf<WhatsappConfig>({
  configSchema: whatsappConfig,
  secretFields: WHATSAPP_SECRETS,
  maxTextLength: WHATSAPP_TEXT_LIMIT,
  acceptsFiles: true,
  checkRecipient: whatsappNumber,
  send,
});

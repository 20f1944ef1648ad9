import { unexpectedAnswer } from './http-errors.js';
import { graphCall } from './meta-graph.js';
import type { OutboundMessage, SendContext, SendOutcome } from './types.js';

/** Page/Instagram-scoped user ids (PSID / IGSID): digits. */
export function metaScopedId(to: string): string | undefined {
  return /^\d{1,40}$/.test(to) ? undefined : `"${to}" is not a page-scoped user id (digits only)`;
}

/**
 * The Send API call Messenger and Instagram share (Meta's Graph API reference): `{recipient:{id},
 * messaging_type:"RESPONSE", message:{text}}` → `{recipient_id, message_id}`. RESPONSE is
 * the only type valid without a message tag, i.e. inside the 24-hour window.
 */
export async function sendPageMessage(
  platform: string,
  url: string,
  token: string,
  m: OutboundMessage,
  ctx: SendContext,
): Promise<SendOutcome> {
  const r = await graphCall<{ recipient_id?: string; message_id?: string }>(platform, {
    url,
    token,
    json: { recipient: { id: m.to }, messaging_type: 'RESPONSE', message: { text: m.text } },
    timeoutMs: ctx.timeoutMs,
    guarded: ctx.guarded,
  });
  if (!r.ok) return r;
  if (!r.body.message_id) return { ok: false, error: unexpectedAnswer(platform, 200) };
  return { ok: true, externalMessageId: r.body.message_id };
}

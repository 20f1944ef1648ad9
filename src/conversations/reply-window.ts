import { getAdapter } from '../platforms/registry.js';
import { isPlatformName, type ReplyPolicy } from '../platforms/types.js';

/**
 * Whether the connected account may message a conversation now, by the platform's rule (its
 * adapter's `replyPolicy`; each platform's documented rules):
 * - `window_24h`: `open` is null when we never saw the person's last message (they may have
 *   written before the connection existed: the platform decides).
 * - `user_must_start`: `open` is true once we saw an inbound message, null when unknown.
 * - `none`: always open.
 */
export interface ReplyWindow {
  policy: ReplyPolicy;
  open: boolean | null;
  last_inbound_at: string | null;
  /** When the 24-hour window closes, or closed (window_24h only, once we saw an inbound message). */
  closes_at: string | null;
}

const REPLY_WINDOW_MS = 24 * 3600_000;

/** The platform's rule for one conversation; `none` for a platform name we do not know. */
export const replyPolicyOf = (platform: string, conversationExternalId: string): ReplyPolicy =>
  isPlatformName(platform) ? getAdapter(platform).replyPolicy(conversationExternalId) : 'none';

export function replyWindow(platform: string, conversationExternalId: string, lastInboundAt: Date | null, now = Date.now()): ReplyWindow {
  const last = lastInboundAt?.toISOString() ?? null;
  const policy = replyPolicyOf(platform, conversationExternalId);
  if (policy === 'window_24h') {
    if (!lastInboundAt) return { policy, open: null, last_inbound_at: null, closes_at: null };
    const closes = lastInboundAt.getTime() + REPLY_WINDOW_MS;
    return { policy, open: now < closes, last_inbound_at: last, closes_at: new Date(closes).toISOString() };
  }
  if (policy === 'user_must_start') return { policy, open: lastInboundAt ? true : null, last_inbound_at: last, closes_at: null };
  return { policy, open: true, last_inbound_at: last, closes_at: null };
}

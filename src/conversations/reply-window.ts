import type { PlatformName } from '../platforms/types.js';

/**
 * Whether the connected account may message a conversation now, by the platform's rule
 * (SPEC §8, PLATFORMS.md):
 * - `window_24h` (WhatsApp, Messenger, Instagram): free-form replies only within 24 hours of
 *   the person's last message; `open` is null when we never saw one (they may have written
 *   before the connection existed: the platform decides).
 * - `user_must_start` (Telegram private chats): a bot may write once the person has written to
 *   it (started the bot); `open` is true once we saw an inbound message, null when unknown.
 * - `none`: no rule known to restrict replies (groups, Slack, Discord, SMS, e-mail).
 */
export interface ReplyWindow {
  policy: 'window_24h' | 'user_must_start' | 'none';
  open: boolean | null;
  last_inbound_at: string | null;
  /** When the 24-hour window closes, or closed (window_24h only, once we saw an inbound message). */
  closes_at: string | null;
}

export const REPLY_WINDOW_MS = 24 * 3600_000;
export const WINDOW_PLATFORMS: readonly PlatformName[] = ['WHATSAPP', 'MESSENGER', 'INSTAGRAM'];

export function replyWindow(platform: string, conversationExternalId: string, lastInboundAt: Date | null, now = Date.now()): ReplyWindow {
  const last = lastInboundAt?.toISOString() ?? null;
  if ((WINDOW_PLATFORMS as readonly string[]).includes(platform)) {
    if (!lastInboundAt) return { policy: 'window_24h', open: null, last_inbound_at: null, closes_at: null };
    const closes = lastInboundAt.getTime() + REPLY_WINDOW_MS;
    return { policy: 'window_24h', open: now < closes, last_inbound_at: last, closes_at: new Date(closes).toISOString() };
  }
  // Telegram groups and channels have negative ids; only private chats need the person to start the bot.
  if (platform === 'TELEGRAM' && !conversationExternalId.startsWith('-')) {
    return { policy: 'user_must_start', open: lastInboundAt ? true : null, last_inbound_at: last, closes_at: null };
  }
  return { policy: 'none', open: true, last_inbound_at: last, closes_at: null };
}

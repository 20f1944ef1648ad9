import { discordInbound } from './discord/inbound.js';
import { emailInbound } from './email/inbound.js';
import { instagramInbound } from './instagram/inbound.js';
import { messengerInbound } from './messenger/inbound.js';
import { slackInbound } from './slack/inbound.js';
import { smsInbound } from './sms/inbound.js';
import { telegramInbound } from './telegram/inbound.js';
import type { InboundHalf, PlatformName } from './types.js';
import { whatsappInbound } from './whatsapp/inbound.js';

/** The inbound half of every platform: verification, handshakes, dedupe keys, normalisers. */
export const INBOUND: Record<PlatformName, InboundHalf> = {
  TELEGRAM: telegramInbound,
  WHATSAPP: whatsappInbound,
  MESSENGER: messengerInbound,
  INSTAGRAM: instagramInbound,
  SLACK: slackInbound,
  DISCORD: discordInbound,
  SMS: smsInbound,
  EMAIL: emailInbound,
};

import { discordSend } from './discord/send.js';
import { emailSend } from './email/send.js';
import { instagramSend } from './instagram/send.js';
import { messengerSend } from './messenger/send.js';
import { slackSend } from './slack/send.js';
import { smsSend } from './sms/send.js';
import { telegramSend } from './telegram/send.js';
import type { PlatformName, SendHalf } from './types.js';
import { whatsappSend } from './whatsapp/send.js';

/** Each platform's sending half: config schema, secrets, limits, recipient check, send. */
export const SEND: Record<PlatformName, SendHalf> = {
  TELEGRAM: telegramSend,
  WHATSAPP: whatsappSend,
  MESSENGER: messengerSend,
  INSTAGRAM: instagramSend,
  SLACK: slackSend,
  DISCORD: discordSend,
  SMS: smsSend,
  EMAIL: emailSend,
};

import { API_BASE_ADDRESS, publicText } from '../config-fields.js';
import { configString } from '../inbound-common.js';
import { mediaFromUrl } from '../media-url.js';
import type { PlatformAdapter } from '../types.js';
import { smsInbound } from './inbound.js';
import { smsSend } from './send.js';

export const sms = {
  name: 'SMS',
  ...smsSend,
  ...smsInbound,
  addressFields: API_BASE_ADDRESS,
  // A Twilio long code sends about 1 message per second (more queue at Twilio).
  rateBudget: { connection: { rate: 1, perMs: 1000, burst: 5 }, recipient: { rate: 1, perMs: 1000, burst: 3 } },
  replyPolicy: () => 'none',
  systemExternalId: (config) => configString(config, 'from') ?? configString(config, 'messaging_service_sid') ?? 'sms',
  routingFields: ['from', 'messaging_service_sid'],
  // Twilio media URLs take the account's basic auth (and redirect once to storage).
  downloadMedia: (config, media, fetch) =>
    mediaFromUrl(media, fetch, { Authorization: `Basic ${Buffer.from(`${config.account_sid}:${config.auth_token}`).toString('base64')}` }),
  deepLink: {
    url(config, code) {
      const from = publicText(config, 'from');
      return /^\+?\d{6,15}$/.test(from) ? `sms:${from}?body=${code}` : undefined;
    },
  },
} satisfies PlatformAdapter;

import { API_BASE_ADDRESS, publicText } from '../config-fields.js';
import { configString } from '../inbound-common.js';
import type { PlatformAdapter } from '../types.js';
import { whatsappInbound } from './inbound.js';
import { whatsappMedia } from './media.js';
import { whatsappSend } from './send.js';

export const whatsapp = {
  name: 'WHATSAPP',
  ...whatsappSend,
  ...whatsappInbound,
  addressFields: API_BASE_ADDRESS,
  rateBudget: { connection: { rate: 80, perMs: 1000, burst: 0 }, recipient: { rate: 1, perMs: 6000, burst: 3 } },
  replyPolicy: () => 'window_24h',
  systemExternalId: (config) => configString(config, 'phone_number_id') ?? 'whatsapp',
  routingFields: ['phone_number_id'],
  downloadMedia: whatsappMedia,
  deepLink: {
    url(config, code) {
      const digits = publicText(config, 'display_phone_number').replace(/\D/g, '');
      return digits.length >= 6 ? `https://wa.me/${digits}?text=${code}` : undefined;
    },
  },
} satisfies PlatformAdapter;

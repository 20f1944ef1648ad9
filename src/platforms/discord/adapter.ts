import { API_BASE_ADDRESS } from '../config-fields.js';
import { configString } from '../inbound-common.js';
import { downloadByUrl } from '../media-url.js';
import { NO_DEEP_LINK, type PlatformAdapter } from '../types.js';
import { discordInbound } from './inbound.js';
import { discordSend } from './send.js';

export const discord = {
  name: 'DISCORD',
  ...discordSend,
  ...discordInbound,
  addressFields: API_BASE_ADDRESS,
  // 50 requests/s per bot; the create-message bucket allows 5 per 5 s per channel.
  rateBudget: { connection: { rate: 50, perMs: 1000, burst: 0 }, recipient: { rate: 5, perMs: 5000, burst: 0 } },
  replyPolicy: () => 'none',
  systemExternalId: (config) => configString(config, 'application_id') ?? 'discord',
  routingFields: ['application_id'],
  // Attachment URLs are fetched as they are.
  downloadMedia: downloadByUrl,
  deepLink: NO_DEEP_LINK,
} satisfies PlatformAdapter;

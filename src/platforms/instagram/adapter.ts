import { API_BASE_ADDRESS } from '../config-fields.js';
import { configString } from '../inbound-common.js';
import { downloadByUrl } from '../media-url.js';
import { NO_DEEP_LINK, type PlatformAdapter } from '../types.js';
import { instagramInbound } from './inbound.js';
import { instagramSend } from './send.js';

export const instagram = {
  name: 'INSTAGRAM',
  ...instagramSend,
  ...instagramInbound,
  addressFields: API_BASE_ADDRESS,
  rateBudget: { connection: { rate: 40, perMs: 1000, burst: 0 }, recipient: { rate: 1, perMs: 1000, burst: 3 } },
  replyPolicy: () => 'window_24h',
  systemExternalId: (config) => configString(config, 'ig_account_id') ?? 'instagram',
  routingFields: ['ig_account_id', 'page_id'],
  // Attachments carry a payload.url, fetched as it is.
  downloadMedia: downloadByUrl,
  deepLink: NO_DEEP_LINK,
} satisfies PlatformAdapter;

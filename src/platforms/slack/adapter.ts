import { API_BASE_ADDRESS } from '../config-fields.js';
import { configString } from '../inbound-common.js';
import { mediaFromUrl } from '../media-url.js';
import { NO_DEEP_LINK, type PlatformAdapter } from '../types.js';
import { slackInbound } from './inbound.js';
import { slackSend } from './send.js';

export const slack = {
  name: 'SLACK',
  ...slackSend,
  ...slackInbound,
  addressFields: API_BASE_ADDRESS,
  // chat.postMessage: ~1/s per channel with short bursts; "several hundred per minute" per workspace.
  rateBudget: { connection: { rate: 5, perMs: 1000, burst: 20 }, recipient: { rate: 1, perMs: 1000, burst: 3 } },
  replyPolicy: () => 'none',
  systemExternalId: (config) => configString(config, 'bot_user_id') ?? 'slack-bot',
  // The bot user (one per app installation) is the account: a team alone may host several apps.
  routingFields: ['bot_user_id'],
  // url_private needs the bot token.
  downloadMedia: (config, media, fetch) => mediaFromUrl(media, fetch, { Authorization: `Bearer ${String(config.bot_token)}` }),
  deepLink: NO_DEEP_LINK,
} satisfies PlatformAdapter;

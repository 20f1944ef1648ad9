import { baseUrl } from '../http-client.js';
import { GRAPH_VERSION } from '../meta-graph.js';
import { metaScopedId, sendPageMessage } from '../meta-send-api.js';
import { sendHalf, type OutboundMessage, type SendContext, type SendOutcome } from '../types.js';
import { INSTAGRAM_SECRETS, instagramConfig, type InstagramConfig } from './config.js';

/** Instagram's API reference: text must stay under 1000 characters. */
const INSTAGRAM_TEXT_LIMIT = 1000;
/** Instagram's API reference gives the path as `{base}/{IG_ID}/messages`: the real base carries the version. */
const REAL_BASE = `https://graph.instagram.com/${GRAPH_VERSION}`;

function send(config: InstagramConfig, m: OutboundMessage, ctx: SendContext): Promise<SendOutcome> {
  const url = `${baseUrl(config, ctx, REAL_BASE)}/${config.ig_account_id}/messages`;
  return sendPageMessage('Instagram', url, config.page_access_token, m, ctx);
}

export const instagramSend = sendHalf<InstagramConfig>({
  configSchema: instagramConfig,
  secretFields: INSTAGRAM_SECRETS,
  maxTextLength: INSTAGRAM_TEXT_LIMIT,
  acceptsFiles: false,
  checkRecipient: metaScopedId,
  send,
});

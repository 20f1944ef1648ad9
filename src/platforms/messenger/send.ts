import { baseUrl } from '../http-client.js';
import { GRAPH_BASE, GRAPH_VERSION } from '../meta-graph.js';
import { sendHalf, type OutboundMessage, type SendContext, type SendOutcome } from '../types.js';
import { metaScopedId, sendPageMessage } from '../meta-send-api.js';
import { MESSENGER_SECRETS, messengerConfig, type MessengerConfig } from './config.js';

/** Messenger's documented text limit (the Send API refuses longer text). */
const MESSENGER_TEXT_LIMIT = 2000;

function send(config: MessengerConfig, m: OutboundMessage, ctx: SendContext): Promise<SendOutcome> {
  const url = `${baseUrl(config, ctx, GRAPH_BASE)}/${config.api_version ?? GRAPH_VERSION}/${config.page_id}/messages`;
  return sendPageMessage('Messenger', url, config.page_access_token, m, ctx);
}

export const messengerSend = sendHalf<MessengerConfig>({
  configSchema: messengerConfig,
  secretFields: MESSENGER_SECRETS,
  maxTextLength: MESSENGER_TEXT_LIMIT,
  acceptsFiles: false,
  checkRecipient: metaScopedId,
  send,
});

import { downloadByUrl } from '../media-url.js';
import { NO_DEEP_LINK, type PlatformAdapter } from '../types.js';
import { SANDBOX_DELIVERED_AFTER_MS, SANDBOX_READ_AFTER_MS } from './config.js';
import { sandboxInbound, statusReports } from './inbound.js';
import { SANDBOX_ACCOUNT_ID, sandboxSend } from './send.js';

/**
 * A platform in the box, for trying the service without any account: sends are accepted (or
 * refused on request, `/fail CODE`) and recorded exactly as a real platform's, the simulated
 * end user's device reports them delivered and read on the connection's schedule, and inbound
 * messages come from POST /v1/platform-connections/:id/sandbox/messages through the same
 * inbound queue and worker as every platform's webhooks.
 */
export const sandbox = {
  name: 'SANDBOX',
  ...sandboxSend,
  ...sandboxInbound,
  // It calls no API; media given by URL is fetched under the outbound address policy like any platform's.
  addressFields: {},
  // Generous, so it never stands in the way, but real budgets: pacing and holds work as elsewhere.
  rateBudget: { connection: { rate: 100, perMs: 1000, burst: 50 }, recipient: { rate: 20, perMs: 1000, burst: 10 } },
  replyPolicy: () => 'none',
  systemExternalId: () => SANDBOX_ACCOUNT_ID,
  routingFields: [],
  downloadMedia: downloadByUrl,
  deepLink: NO_DEEP_LINK,
  reportsAfterSend: (config, sent) => statusReports(config, sent, { delivered: SANDBOX_DELIVERED_AFTER_MS, read: SANDBOX_READ_AFTER_MS }),
} satisfies PlatformAdapter;

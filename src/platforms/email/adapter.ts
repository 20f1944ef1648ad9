import { configString } from '../inbound-common.js';
import { downloadByUrl } from '../media-url.js';
import { NO_DEEP_LINK, type PlatformAdapter } from '../types.js';
import { mailboxOf } from './config.js';
import { emailInbound } from './inbound.js';
import { emailSend } from './send.js';

export const email = {
  name: 'EMAIL',
  ...emailSend,
  ...emailInbound,
  // SMTP servers (api_base_url replaces smtp_url's server).
  addressFields: { smtp_url: 'smtp', api_base_url: 'smtp' },
  rateBudget: { connection: { rate: 10, perMs: 1000, burst: 10 }, recipient: { rate: 5, perMs: 1000, burst: 5 } },
  replyPolicy: () => 'none',
  systemExternalId: (config) => configString(config, 'from') ?? 'email',
  routingFields: ['from'],
  // `Name <a@b.c>` and `A@B.C` are one mailbox.
  canonicalRoutingId: (from) => mailboxOf(from).trim().toLowerCase(),
  // Attachments come inside the delivery (taken before this); a URL is fetched as it is.
  downloadMedia: downloadByUrl,
  deepLink: NO_DEEP_LINK,
} satisfies PlatformAdapter;

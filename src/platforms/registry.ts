import { INBOUND } from './registry-inbound.js';
import { SEND } from './registry-send.js';
import { PLATFORM_NAMES, type InboundHalf, type PlatformAdapter, type PlatformName } from './types.js';

/**
 * Every platform behind the one adapter interface (DESIGN §6), assembled from each platform
 * folder's sending half (config.ts, send.ts) and inbound half (inbound.ts).
 */
const ADAPTERS = Object.fromEntries(
  PLATFORM_NAMES.map((name) => [name, { name, ...SEND[name], ...INBOUND[name] } as PlatformAdapter]),
) as Record<PlatformName, PlatformAdapter>;

export function getAdapter(name: PlatformName): PlatformAdapter {
  const adapter = ADAPTERS[name];
  if (!adapter) throw new Error(`no adapter for platform ${name}`);
  return adapter;
}

/** The inbound half plus the optional shared-URL routing of the Meta family. */
export function getInbound(name: PlatformName): PlatformAdapter & Pick<InboundHalf, 'routingIds'> {
  return getAdapter(name) as PlatformAdapter & Pick<InboundHalf, 'routingIds'>;
}

/**
 * The external id of the connected account itself (the bot, page or number): the system user
 * that `sent_to` of inbound messages and `sent_by` of outbound ones point at.
 */
export function systemExternalId(platform: PlatformName, config: Record<string, unknown>): string {
  const pick = (k: string) => (typeof config[k] === 'string' && config[k] ? String(config[k]) : undefined);
  switch (platform) {
    case 'TELEGRAM':
      // A bot token is "<bot id>:<secret>": the id part is the bot's user id.
      return pick('bot_token')?.split(':')[0] ?? 'bot';
    case 'WHATSAPP':
      return pick('phone_number_id') ?? 'whatsapp';
    case 'MESSENGER':
      return pick('page_id') ?? 'page';
    case 'INSTAGRAM':
      return pick('ig_account_id') ?? 'instagram';
    case 'DISCORD':
      return pick('application_id') ?? 'discord';
    case 'SMS':
      return pick('from') ?? pick('messaging_service_sid') ?? 'sms';
    case 'EMAIL':
      return pick('from') ?? 'email';
    case 'SLACK':
      return pick('bot_user_id') ?? 'slack-bot';
  }
}

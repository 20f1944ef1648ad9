import { discord } from './discord/adapter.js';
import { email } from './email/adapter.js';
import { instagram } from './instagram/adapter.js';
import { messenger } from './messenger/adapter.js';
import { sandbox } from './sandbox/adapter.js';
import { slack } from './slack/adapter.js';
import { sms } from './sms/adapter.js';
import { telegram } from './telegram/adapter.js';
import type { PlatformAdapter, PlatformName } from './types.js';
import { whatsapp } from './whatsapp/adapter.js';

/** One adapter per platform name, each under its own name: a name without one does not compile. */
export type Registry = { readonly [N in PlatformName]: PlatformAdapter & { name: N } };

/**
 * Every platform behind the one adapter interface (docs/architecture.md, Platforms), each assembled in its own
 * folder's `adapter.ts`. A new platform is its folder, its name in PLATFORM_NAMES and its line here.
 */
export const ADAPTERS: Registry = {
  TELEGRAM: telegram,
  WHATSAPP: whatsapp,
  MESSENGER: messenger,
  INSTAGRAM: instagram,
  SLACK: slack,
  DISCORD: discord,
  SMS: sms,
  EMAIL: email,
  SANDBOX: sandbox,
};

export function getAdapter(name: PlatformName): PlatformAdapter {
  const adapter = ADAPTERS[name];
  if (!adapter) throw new Error(`no adapter for platform ${name}`);
  return adapter;
}

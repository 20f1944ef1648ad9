import { z } from 'zod';
import { SHARED_WEBHOOK_PLATFORMS } from '../connections/connections.js';
import { HANDSHAKE_ROUTE, INBOUND_ROUTE } from '../inbound/receiver.js';
import { eventAlias, systemEventType } from '../ledger/event-types.js';
import { CONSOLE_GUIDE, type PlatformGuide } from './console-guide.js';
import { ADAPTERS } from './registry.js';
import { PLATFORM_NAMES, type PlatformName } from './types.js';

interface FieldSchema {
  type?: string;
  format?: string;
  pattern?: string;
  enum?: unknown[];
}

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

/** The constraint a key's value must meet, as its zod schema states it. */
function formatOf(f: FieldSchema): string {
  if (f.pattern) return `\`${cell(f.pattern)}\``;
  if (f.format) return f.format;
  return f.type ?? 'any';
}

/** The config keys of a platform, read from its zod schema (and its adapter's secret list). */
export function configKeys(name: PlatformName): { key: string; required: boolean; secret: boolean; format: string }[] {
  const adapter = ADAPTERS[name];
  const schema = z.toJSONSchema(adapter.configSchema, { io: 'input', unrepresentable: 'any' }) as {
    properties: Record<string, FieldSchema>;
    required?: string[];
  };
  return Object.entries(schema.properties).map(([key, f]) => ({
    key,
    required: schema.required?.includes(key) ?? false,
    secret: adapter.secretFields.includes(key),
    format: formatOf(f),
  }));
}

const inboundAlias = (platform: string) => eventAlias({ event_type: systemEventType('message.inbound'), payload: { platform } });
const statusAlias = (status: string) => eventAlias({ event_type: systemEventType('message.status'), payload: { status } });
const named = (alias: string | null) => (alias ? ` (also \`${alias}\`)` : '');

function events(name: PlatformName, guide: PlatformGuide<never>): string[] {
  const platform = name.toLowerCase();
  const statuses = guide.statuses.map((s) => `\`${s}\`${named(statusAlias(s))}`).join(', ');
  const failed = `\`failed\`${guide.statuses.includes('failed') ? '' : named(statusAlias('failed'))}`;
  const inbound = `${guide.inboundNote ?? 'each message'}${guide.edits ? ', and each edit of one (`edited: true`)' : ''}`;
  return [
    `- \`${systemEventType('message.inbound')}\`${named(inboundAlias(platform))}: ${inbound}.`,
    `- \`${systemEventType('message.outbound')}\`: each message sent through POST /v1/messages.`,
    `- \`${systemEventType('message.status')}\`: ${statuses ? `${statuses} as the platform reports them` : 'the platform reports no statuses'}; ${failed} when a send fails for good.`,
    ...(guide.reactions ? [`- \`${systemEventType('message.reaction')}\`: a reaction added or removed.`] : []),
    `- \`${systemEventType('link_code.activation')}\` (and \`${systemEventType('user.merged')}\` when it merges users): a message that is a link code.`,
  ];
}

/** docs/platforms.md, generated from the config schemas and ./console-guide.ts (`npm run docs:platforms`). */
export function renderPlatformDocs(): string {
  const route = (platform: string) =>
    INBOUND_ROUTE.replace(':webhookId', '{webhook_id}').replace(':webhookSecret', '{webhook_secret}') + platform;
  const out = [
    '# Connecting platforms',
    '',
    '<!-- Generated from src/platforms/*/config.ts and src/platforms/console-guide.ts by `npm run docs:platforms`; do not edit by hand. -->',
    '',
    'A connection is created with `POST /v1/platform-connections` `{platform_name, name, config}`',
    '(GraphQL `createPlatformConnection`). `config` takes exactly the keys listed for the platform:',
    'an unknown key is refused. Secret keys are stored encrypted and never shown again (reads',
    "mask them). The answer's `webhook_url` is the inbound URL to register with the platform:",
    `\`{PUBLIC_BASE_URL}${route('')}\`. ${SHARED_WEBHOOK_PLATFORMS.map((p) => CONSOLE_GUIDE[p].title.split(' ')[0]).join(', ')}`,
    'share one such URL per platform across every connection of the service (each delivery goes to',
    'the connection owning the account it names); the others get one per connection. See',
    'docs/inbound.md for how each delivery is verified, and docs/events.md for the events.',
    '',
    '| Platform | `platform_name` | Inbound URL | Reports statuses | Reactions |',
    '|---|---|---|---|---|',
    ...PLATFORM_NAMES.map((name) => {
      const g = CONSOLE_GUIDE[name] as PlatformGuide<never>;
      const url = SHARED_WEBHOOK_PLATFORMS.includes(name) ? 'shared by the platform' : 'one per connection';
      return `| [${g.title}](#${name.toLowerCase()}) | \`${name}\` | ${url} | ${g.statuses.join(', ') || '—'} | ${g.reactions ? 'yes' : 'no'} |`;
    }),
  ];
  for (const name of PLATFORM_NAMES) {
    const g = CONSOLE_GUIDE[name] as PlatformGuide<never>;
    const fields = g.fields as Record<string, string>;
    out.push(
      '',
      `<a id="${name.toLowerCase()}"></a>`,
      '',
      `## ${g.title}`,
      '',
      '| Key | Required | Secret | Format | Where to find it |',
      '|---|---|---|---|---|',
    );
    for (const k of configKeys(name))
      out.push(`| \`${k.key}\` | ${k.required ? 'yes' : 'no'} | ${k.secret ? 'yes' : 'no'} | ${k.format} | ${cell(fields[k.key] ?? '')} |`);
    out.push('', `**Inbound URL.** ${g.register}`);
    if (SHARED_WEBHOOK_PLATFORMS.includes(name))
      out.push(
        `The verification handshake is also answered at \`{PUBLIC_BASE_URL}${HANDSHAKE_ROUTE.replace(':platform', name.toLowerCase())}\`.`,
      );
    out.push('', '**Events.**', '', ...events(name, g));
  }
  return `${out.join('\n')}\n`;
}

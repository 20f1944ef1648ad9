import { z } from 'zod';
import { aliasRuleOf, EVENT_ALIASES, RESERVED_PREFIXES, SYSTEM_EVENTS, type SystemEventType } from './event-types.js';

/** The part of a JSON Schema (as zod writes it) that the table reads. */
interface JsonSchema {
  type?: string | string[];
  format?: string;
  const?: unknown;
  enum?: unknown[];
  description?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
}

interface Row {
  field: string;
  type: string;
  required: boolean;
  description: string;
}

const objectVariants = (s: JsonSchema): JsonSchema[] => (s.anyOf ?? [s]).filter((v) => v.properties);

function typeOf(s: JsonSchema): string {
  if (s.const !== undefined) return `\`${JSON.stringify(s.const)}\``;
  if (s.enum) return s.enum.map((v) => `\`${JSON.stringify(v)}\``).join(' \\| ');
  if (s.anyOf) return [...new Set(s.anyOf.map(typeOf))].join(' \\| ');
  const types = Array.isArray(s.type) ? s.type : s.type ? [s.type] : ['any'];
  return types.map((t) => (t === 'string' && s.format ? s.format : t === 'array' && s.items ? `${typeOf(s.items)}[]` : t)).join(' \\| ');
}

/**
 * The fields of an object schema, nested objects flattened to dotted paths. The variants of a
 * union of objects are merged: a field's types are joined, and it is required only when
 * every variant requires it.
 */
function rows(s: JsonSchema, prefix = ''): Row[] {
  const variants = objectVariants(s);
  const names = [...new Set(variants.flatMap((v) => Object.keys(v.properties!)))];
  return names.flatMap((name) => {
    const defs = variants.flatMap((v) => (v.properties![name] ? [v.properties![name]] : []));
    const field = `${prefix}${name}`;
    const merged: JsonSchema = defs.length === 1 ? defs[0] : { anyOf: defs };
    const row: Row = {
      field,
      type: typeOf(merged).replace(/\bobject( \\\| object)+/g, 'object'),
      required: variants.every((v) => v.required?.includes(name)),
      description: defs.find((d) => d.description)?.description ?? '',
    };
    const nested = defs.flatMap((d) => objectVariants(d));
    return [row, ...(nested.length ? rows({ anyOf: nested }, `${field}.`) : [])];
  });
}

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function table(s: JsonSchema): string[] {
  return [
    '| Field | Type | Required | Description |',
    '|---|---|---|---|',
    ...rows(s).map((r) => `| \`${r.field}\` | ${r.type} | ${r.required ? 'yes' : 'no'} | ${cell(r.description)} |`),
  ];
}

const anchor = (type: string) => `#${type.replace(/\./g, '')}`;
const code = (names: readonly string[]) => names.map((n) => `\`${n}\``).join(', ');

/** Top-level payload fields, every variant's (the sections below give types and nesting). */
const topFields = (s: JsonSchema) => [...new Set(objectVariants(s).flatMap((v) => Object.keys(v.properties!)))];

/** One line per type: what emits it, its fields, and every name a pattern or filter can select it by. */
function overview(): string[] {
  const types = Object.keys(SYSTEM_EVENTS) as SystemEventType[];
  return [
    '| Event type | Meaning | Emitted by | Payload fields | Names that match it |',
    '|---|---|---|---|---|',
    ...types.map((type) => {
      const def = SYSTEM_EVENTS[type];
      const rule = aliasRuleOf(type);
      const names =
        def.stored === false
          ? 'none: sent to the one subscription tested, whatever its patterns'
          : [`\`${type}\``, ...(rule ? [`${code(Object.keys(rule.names))} (${rule.rule})`] : [])].join('; ');
      const emitted = def.emittedBy.map((e) => cell(e.when)).join('; ');
      const fields = code(topFields(z.toJSONSchema(def.payload) as JsonSchema));
      return `| [\`${type}\`](${anchor(type)}) | ${cell(def.summary)} | ${emitted} | ${fields} | ${names} |`;
    }),
    '| custom types | Client-defined: lower case, digits, `_` and `.`, outside the reserved prefixes | POST /v1/events (GraphQL `createEvent`) | whatever the client posts; checked against its event schema when one enforces validation | its own name |',
  ];
}

/** The names the API gives that are not stored types, each with the stored events it selects. */
function aliasTable(): string[] {
  return [
    '| Name | Selects | Delivered and streamed as |',
    '|---|---|---|',
    ...[...EVENT_ALIASES].map(([name, type]) => {
      return `| \`${name}\` | [\`${type}\`](${anchor(type)}) whose ${aliasRuleOf(type)!.names[name]} | \`${type}\` |`;
    }),
  ];
}

/** docs/events.md, generated from the catalog (`npm run docs:events`). */
export function renderEventDocs(): string {
  const out = [
    '# Event types',
    '',
    '<!-- Generated from src/ledger/event-types.ts by `npm run docs:events`; do not edit by hand. -->',
    '',
    'Every event type: the ones the service records itself, and custom ones clients post. Custom',
    `event types (POST /v1/events) cannot use the reserved prefixes ${RESERVED_PREFIXES.map((p) => `\`${p}\``).join(', ')}.`,
    "Every payload is an object with exactly the fields listed; a message's platform-specific",
    'fields are the one open part.',
    '',
    ...overview(),
    '',
    '## Other names of stored events',
    '',
    'The API names some facts twice: `message.read` is a `message.status` whose status is `read`,',
    '`message.telegram.inbound` a `message.inbound` from Telegram. The ledger stores each fact once,',
    'under its stored type, and records the one other name it answers to. Webhook subscription',
    'patterns, stream filters (SSE `eventTypes`, GraphQL `eventStream(eventTypes:)`) and the',
    '`event_type` filter of GET /v1/events (GraphQL `events(filters: {eventType})`) match a pattern',
    'against both names, so a subscription to `message.read`, to `message.*` or to both receives',
    'the event once.',
    '',
    "A delivery body's and a stream frame's `event_type` (`eventType`) is always the stored type,",
    'whichever name selected it: a receiver subscribed to `message.read` gets `event_type`',
    '`message.status` with `payload.status` `read`. The payload says which alias applies',
    '(`status`, `platform`), so the body needs no second type field and stays the same for every',
    'subscription.',
    '',
    ...aliasTable(),
    '',
    '## Channels',
    '',
    'A custom event may carry `channels` (POST /v1/events, GraphQL `createEvent(channels:)`): at',
    'most 20 tags of 1-64 characters from `A-Z a-z 0-9 _ . : @ -`, for instance one per customer of',
    'your own. They are stored and indexed, answered with the event (`channels`; in a webhook',
    'body only when there are some), and select events everywhere: GET /v1/events `?channel=a,b`,',
    'the SSE stream `?channels=a,b`, GraphQL `events(filters: {channels})` and',
    "`eventStream(channels:)`, and a webhook subscription's `channels`. Each selects the events",
    'carrying any of the channels named. Events the service records itself carry none: they concern',
    'the whole application (its connections, its users), not one of its customers.',
    '',
    'A developer-portal session minted with a `scope` (channels and/or event-type patterns) sees only',
    'the events in it, on every face it can open, and every webhook subscription it makes stays',
    'inside it (docs/portal/README.md, *Embedding it for one of your customers*).',
  ];
  for (const [type, def] of Object.entries(SYSTEM_EVENTS)) {
    const schema = z.toJSONSchema(def.payload) as JsonSchema;
    out.push('', `## ${type}`, '', def.summary, '', 'Emitted by:', '', ...def.emittedBy.map((e) => `- \`${e.file}\`: ${e.when}`));
    if (def.stored === false) out.push('', 'Delivered to the webhook only: never stored, listed or streamed.');
    if (schema.anyOf) {
      for (const variant of schema.anyOf) out.push('', `One form: ${variant.description ?? ''}`, '', ...table(variant));
    } else {
      out.push('', ...table(schema));
    }
  }
  return `${out.join('\n')}\n`;
}

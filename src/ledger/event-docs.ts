import { z } from 'zod';
import { RESERVED_PREFIXES, SYSTEM_EVENTS } from './event-types.js';

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

/** docs/events.md, generated from the catalog (`npm run docs:events`). */
export function renderEventDocs(): string {
  const out = [
    '# System event types',
    '',
    '<!-- Generated from src/ledger/event-types.ts by `npm run docs:events`; do not edit by hand. -->',
    '',
    'The events the service records itself. Custom event types (POST /v1/events) cannot use the',
    `reserved prefixes ${RESERVED_PREFIXES.map((p) => `\`${p}\``).join(', ')}. Every payload is an`,
    "object with exactly the fields listed; a message's platform-specific fields are the one",
    'open part.',
    '',
    '| Event type | Meaning |',
    '|---|---|',
    ...Object.entries(SYSTEM_EVENTS).map(([type, def]) => `| [\`${type}\`](#${type.replace(/\./g, '')}) | ${cell(def.summary)} |`),
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

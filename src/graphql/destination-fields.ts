import type { z } from 'zod';
import type { DestinationOutput } from '../destinations/inputs.js';
import { BROKER_KINDS, DESTINATIONS } from '../destinations/registry.js';

const camel = (key: string) => key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

const scalarOf = (schema: z.ZodType) => {
  const type = (schema as { def?: { type?: string } }).def?.type;
  return type === 'string' ? 'String' : type === 'number' ? 'Float' : type === 'boolean' ? 'Boolean' : 'JSON';
};

/**
 * Every broker kind's shown settings as GraphQL fields, named in camelCase and typed from the
 * kind's REST output schema, so a kind added to the registry shows in GraphQL as it does in
 * REST. A name two kinds type differently is JSON.
 */
const FIELDS = (() => {
  const fields = new Map<string, { rest: string; scalar: string; description?: string }>();
  for (const adapter of Object.values(DESTINATIONS))
    for (const [rest, schema] of Object.entries(adapter.output.shape as Record<string, z.ZodType>)) {
      if (rest === 'kind') continue;
      const seen = fields.get(camel(rest));
      const scalar = scalarOf(schema);
      fields.set(camel(rest), {
        rest,
        scalar: seen && seen.scalar !== scalar ? 'JSON' : scalar,
        description: seen?.description ?? schema.description,
      });
    }
  return fields;
})();

const quoted = (text: string) => JSON.stringify(text);

/** The SDL of `SubscriptionDestination`. */
export const destinationTypeDefs = /* GraphQL */ `
  "Where a subscription's deliveries go (docs/destinations.md). A broker's settings are null on a webhook and on a kind without them; its URL is shown without credentials."
  type SubscriptionDestination {
    ${quoted(`webhook or a broker kind: ${BROKER_KINDS.join(', ')}.`)}
    kind: String!
    ${[...FIELDS]
      .map(([name, f]) => `${quoted(`${f.description ? `${f.description}; ` : ''}REST: ${f.rest}.`)}\n    ${name}: ${f.scalar}`)
      .join('\n    ')}
  }
`;

/** A destination as REST shows it (never its credentials), in GraphQL names; a field its kind lacks is null. */
export function toDestinationNode(d: DestinationOutput): Record<string, unknown> {
  const shown = d as Record<string, unknown>;
  return Object.fromEntries([['kind', d.kind], ...[...FIELDS].map(([name, f]) => [name, shown[f.rest] ?? null])]);
}

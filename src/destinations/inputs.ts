import { z } from 'zod';
import { DESTINATIONS } from './registry.js';

type Adapter = (typeof DESTINATIONS)[keyof typeof DESTINATIONS];
const adapters = Object.values(DESTINATIONS) as [Adapter, ...Adapter[]];

const webhook = z.strictObject({ kind: z.literal('webhook') });

/** A subscription's `destination` as written: `webhook` (its URL in `target_url`) or a registered broker kind. */
export const destinationInput = z
  .discriminatedUnion('kind', [webhook, ...adapters.map((a) => a.input)] as [typeof webhook, ...Adapter['input'][]])
  .describe('where deliveries go; absent: {"kind":"webhook"} to target_url (docs/destinations.md)');
export type DestinationInput = z.infer<typeof destinationInput>;

/** A subscription's `destination` as shown: never its credentials. */
export const destinationOutput = z.discriminatedUnion('kind', [webhook, ...adapters.map((a) => a.output)] as [
  typeof webhook,
  ...Adapter['output'][],
]);
export type DestinationOutput = z.infer<typeof destinationOutput>;

import { z } from 'zod';
import { DESTINATIONS } from './registry.js';

type Adapter = (typeof DESTINATIONS)[keyof typeof DESTINATIONS];
const adapters = Object.values(DESTINATIONS) as [Adapter, ...Adapter[]];

const webhook = z.strictObject({ kind: z.literal('webhook') });

/** A subscription's `destination` as written: `webhook` (its URL in `target_url`) or a registered broker kind. */
export const destinationInput = z
  .discriminatedUnion('kind', [webhook, ...adapters.map((a) => a.input)] as [typeof webhook, ...Adapter['input'][]])
  .describe('where deliveries go; absent: {"kind":"webhook"} to target_url (docs/destinations.md)');

/**
 * A `destination` as a change writes it: as on create, except that a broker destination of the
 * subscription's current kind may leave out `url` to keep the stored one, credentials included
 * (they are write-only, so an editor that never saw them can change the other settings).
 */
export const destinationChange = z
  .discriminatedUnion('kind', [webhook, ...adapters.map(urlKept)] as [typeof webhook, ...ReturnType<typeof urlKept>[]])
  .describe(
    'replaces the destination whole; a broker destination of the current kind may leave out `url` to keep the stored one, credentials included (docs/destinations.md)',
  );
export type DestinationChange = z.infer<typeof destinationChange>;

function urlKept(a: Adapter) {
  const { url } = a.input.shape;
  return a.input.extend({ url: url.optional().describe(`${url.description ?? 'the URL'}; absent: the stored one is kept`) });
}

/** A subscription's `destination` as shown: never its credentials. */
export const destinationOutput = z.discriminatedUnion('kind', [webhook, ...adapters.map((a) => a.output)] as [
  typeof webhook,
  ...Adapter['output'][],
]);
export type DestinationOutput = z.infer<typeof destinationOutput>;

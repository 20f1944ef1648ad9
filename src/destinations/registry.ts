import { nats } from './nats/adapter.js';
import { rabbitmq } from './rabbitmq/adapter.js';
import type { DestinationAdapter } from './types.js';

/**
 * Every destination kind besides `webhook` (HTTP, src/webhooks), each assembled in its own
 * folder's `adapter.ts`. A new kind is its folder and its line here (CONTRIBUTING.md).
 */
export const DESTINATIONS = {
  rabbitmq,
  nats,
} as const satisfies Record<string, DestinationAdapter>;

export type BrokerKind = keyof typeof DESTINATIONS;
export const BROKER_KINDS = Object.keys(DESTINATIONS) as BrokerKind[];

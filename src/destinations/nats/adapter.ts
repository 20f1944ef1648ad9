import type { OutboundPolicy } from '../../net/outbound-policy.js';
import type { DestinationAdapter } from '../types.js';
import { natsInput, natsOutput, prepareNats, type NatsInput } from './config.js';
import { createNatsSender } from './sender.js';

/** NATS JetStream: publish with the stream's ack, `Nats-Msg-Id` = the delivery id (docs/destinations.md). */
export const nats = {
  kind: 'nats',
  input: natsInput,
  output: natsOutput,
  prepare: (input: Record<string, unknown>, policy: OutboundPolicy) => prepareNats(input as NatsInput, policy),
  createSender: createNatsSender,
} satisfies DestinationAdapter;

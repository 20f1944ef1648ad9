import type { OutboundPolicy } from '../../net/outbound-policy.js';
import type { DestinationAdapter } from '../types.js';
import { prepareRabbitmq, rabbitmqInput, rabbitmqOutput, type RabbitmqInput } from './config.js';
import { createRabbitmqSender } from './sender.js';

/** RabbitMQ (AMQP 0-9-1): publisher confirms, persistent and mandatory messages (docs/destinations.md). */
export const rabbitmq = {
  kind: 'rabbitmq',
  input: rabbitmqInput,
  output: rabbitmqOutput,
  prepare: (input: Record<string, unknown>, policy: OutboundPolicy) => prepareRabbitmq(input as RabbitmqInput, policy),
  createSender: createRabbitmqSender,
} satisfies DestinationAdapter;

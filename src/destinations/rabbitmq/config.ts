import { z } from 'zod';
import { fail, ok, type Result } from '../../errors.js';
import { judgeUrl, type OutboundPolicy } from '../../net/outbound-policy.js';
import { fillTemplate, isTemplate, TEMPLATE_MESSAGE } from '../template.js';
import type { StoredDestination } from '../types.js';

export const rabbitmqInput = z.strictObject({
  kind: z.literal('rabbitmq'),
  url: z.string().min(1).max(2048).describe('amqp:// or amqps:// URL, credentials and vhost included; write-only'),
  exchange: z
    .string()
    .max(255)
    .regex(/^[A-Za-z0-9_.:-]*$/, 'letters, digits, - _ . : only')
    .describe('the exchange messages are published to; it must exist ("" is the default exchange)'),
  routing_key: z
    .string()
    .max(255)
    .default('{event_type}')
    .refine(isTemplate, { message: TEMPLATE_MESSAGE })
    .describe('template; {event_type} and {app_id} are replaced'),
});
export type RabbitmqInput = z.infer<typeof rabbitmqInput>;

/** What is stored beside the sealed URL and shown to the owner. */
export const rabbitmqConfig = z.object({ exchange: z.string(), routing_key: z.string() });

/** The destination as REST shows it: the URL without credentials. */
export const rabbitmqOutput = rabbitmqConfig.extend({
  kind: z.literal('rabbitmq'),
  url: z.string().describe('the broker URL without credentials'),
});
export type RabbitmqConfig = z.infer<typeof rabbitmqConfig>;

/** The routing key of one message. */
export const routingKey = fillTemplate;

/** The broker URL without credentials (what `target_url` and the logs show). */
function displayUrl(url: URL): string {
  const port = url.port || (url.protocol === 'amqps:' ? '5671' : '5672');
  return `${url.protocol}//${url.hostname}:${port}${url.pathname === '/' ? '' : url.pathname}`;
}

export function prepareRabbitmq(input: RabbitmqInput, policy: OutboundPolicy): Result<StoredDestination> {
  const judged = judgeUrl(input.url, 'amqp', policy);
  const path = ['destination', 'url'];
  if (!judged.ok)
    return judged.reason === 'not a URL'
      ? fail('VALIDATION_ERROR', 'destination.url is not a URL', [{ path, message: 'not a URL' }])
      : fail('INVALID_WEBHOOK_TARGET', `destination.url refused: ${judged.reason}`, [{ path, message: judged.reason }]);
  const config: RabbitmqConfig = { exchange: input.exchange, routing_key: input.routing_key };
  return ok({ config, secret: judged.url.toString(), display: displayUrl(judged.url) });
}

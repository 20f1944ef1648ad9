export {
  createGatewayClient,
  type GatewayClient,
  type GatewayClientOptions,
  type IdempotentOptions,
  type OperationData,
  type OperationFor,
  type OperationName,
  type Operations,
  type PagedPath,
  type PageItem,
} from './client.js';
export { GatewayError, type ErrorBody } from './errors.js';
export type { GraphqlClients } from './graphql.js';
export { OPERATIONS } from './generated/operations.js';
// The whole of openapi-typescript's output, for types this package does not name (operations['…'], components['schemas']…).
export type { $defs, components, operations, paths, webhooks } from './generated/schema.js';
export type { StreamEvent, StreamOptions } from './stream.js';
export {
  verifyWebhook,
  WebhookVerificationError,
  type VerifyWebhookOptions,
  type WebhookDelivery,
  type WebhookEdge,
  type WebhookHeaders,
} from './webhooks.js';

/**
 * The public API's shapes as the portal reads them: taken from the typed client's generated
 * schema (openapi-typescript over GET /v1/openapi.json), so they cannot drift from the API.
 */
import type { operations } from '../../clients/typescript/src/generated/schema.ts';

/** The JSON body an operation of the API document answers with on the given success status. */
export type Answer<N extends keyof operations, S extends 200 | 201 | 202 = 200> = operations[N]['responses'] extends {
  [K in S]: { content: { 'application/json': infer B } };
}
  ? B
  : never;

export type Session = Answer<'getPortalSession'>;
export type Area = Session['areas'][number];

export type RestEvent = Answer<'getEvent'>;

/** An event as the SSE stream (and GraphQL) sends it: the typed client's own description of a frame. */
export type { StreamEvent } from '../../clients/typescript/src/stream.ts';

export type Subscription = Answer<'getWebhook'>;

/** One attempt in a subscription's delivery log (request_headers is null on attempts logged before headers were kept). */
export type DeliveryAttempt = Answer<'listWebhookDeliveries'>['data'][number];

export type Connection = Answer<'getPlatformConnection'>;

export type User = Answer<'listUsers'>['data'][number];
export type UserDetail = Answer<'getUser'>;

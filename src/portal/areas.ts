import { z } from 'zod';

/**
 * What a portal session may open. `all` is the whole public API of its application;
 * `webhooks` is the part an application can embed for its own customers: its webhook
 * subscriptions and their deliveries, over REST, and nothing else (no events, connections,
 * users or keys, no GraphQL, no stream).
 */
export const PORTAL_AREAS = ['all', 'webhooks'] as const;
export const portalAreaSchema = z.enum(PORTAL_AREAS);
export type PortalArea = z.infer<typeof portalAreaSchema>;

const WEBHOOK_PATHS = /^\/v1\/webhook-(subscriptions|deliveries)(\/|$)/;

/** Whether a session of these areas may reach the request path (REST, GraphQL at /graphql or /, the stream at /events/stream). */
export function areaAllows(areas: PortalArea[], path: string): boolean {
  if (areas.includes('all')) return true;
  return areas.includes('webhooks') && WEBHOOK_PATHS.test(path);
}

import { z } from 'zod';
import { SCOPES, type Scope } from '../auth/scopes.js';

/**
 * What a portal session may open. `all` is the whole public API of its application;
 * `webhooks` (its webhook subscriptions and their deliveries) and `events` (reading the
 * ledger: the event list, one event, the SSE stream) are the parts an application can embed
 * for its own customers, over REST and SSE only (no connections, users or keys, no GraphQL).
 * Only these two can be confined to an event scope (src/ledger/event-scope.ts).
 */
export const PORTAL_AREAS = ['all', 'webhooks', 'events'] as const;
export const portalAreaSchema = z.enum(PORTAL_AREAS);
export type PortalArea = z.infer<typeof portalAreaSchema>;

/** The scopes each area's routes need: a session holds no scope beyond those of its areas. */
const AREA_SCOPES: Record<PortalArea, readonly Scope[]> = { all: SCOPES, webhooks: ['admin'], events: ['events:read'] };

/** Of `scopes`, those a session of these areas can use. */
export const scopesWithin = (areas: PortalArea[], scopes: readonly Scope[]): Scope[] =>
  scopes.filter((s) => areas.some((a) => AREA_SCOPES[a].includes(s)));

const AREA_PATHS: Record<Exclude<PortalArea, 'all'>, RegExp> = {
  webhooks: /^\/v1\/webhook-(subscriptions|deliveries)(\/|$)/,
  events: /^(\/v1\/events(\/[^/]*)?|\/events\/stream)$/,
};

/** Whether a session of these areas may reach the request path (REST, GraphQL at /graphql or /, the stream at /events/stream). */
export function areaAllows(areas: PortalArea[], path: string): boolean {
  if (areas.includes('all')) return true;
  return areas.some((a) => a !== 'all' && AREA_PATHS[a].test(path));
}

import { z } from 'zod';
import { SCOPES, type Scope } from '../auth/scopes.js';

/**
 * What a portal session may open. `all` is the whole public API of its application;
 * `webhooks` is the part an application can embed for its own customers: its webhook
 * subscriptions and their deliveries, over REST, and nothing else (no events, connections,
 * users or keys, no GraphQL, no stream).
 */
export const PORTAL_AREAS = ['all', 'webhooks'] as const;
export const portalAreaSchema = z.enum(PORTAL_AREAS);
export type PortalArea = z.infer<typeof portalAreaSchema>;

/** The scopes each area's routes need: a session holds no scope beyond those of its areas. */
const AREA_SCOPES: Record<PortalArea, readonly Scope[]> = { all: SCOPES, webhooks: ['admin'] };

/** Of `scopes`, those a session of these areas can use. */
export const scopesWithin = (areas: PortalArea[], scopes: readonly Scope[]): Scope[] =>
  scopes.filter((s) => areas.some((a) => AREA_SCOPES[a].includes(s)));

const WEBHOOK_PATHS = /^\/v1\/webhook-(subscriptions|deliveries)(\/|$)/;

/** Whether a session of these areas may reach the request path (REST, GraphQL at /graphql or /, the stream at /events/stream). */
export function areaAllows(areas: PortalArea[], path: string): boolean {
  if (areas.includes('all')) return true;
  return areas.includes('webhooks') && WEBHOOK_PATHS.test(path);
}

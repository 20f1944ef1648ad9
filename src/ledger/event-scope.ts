import { z } from 'zod';
import type { Sql } from '../db.js';
import { compileEventTypePatterns, eventPatternSchema, type MatchableEvent } from './event-type-match.js';

/** How many channels one event, filter or scope may name, and how long a channel is. */
const MAX_CHANNELS = 20;

/**
 * A channel: a short tag an application puts on its events (a customer, a tenant of its own)
 * so that readers, subscriptions and embedded portal sessions can be limited to it.
 */
export const channelSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9_.:@-]+$/, 'letters, digits and _ . : @ - only');
export const channelsSchema = z
  .array(channelSchema)
  .max(MAX_CHANNELS)
  .transform((list) => [...new Set(list)]);

/**
 * A part of an application's ledger: events on any of `channels` and of a type matching any of
 * `eventTypes`; a missing field does not narrow. It is both a reader's filter and the bound a
 * scoped portal session (and every webhook subscription it makes) is confined to.
 */
export interface EventScope {
  channels?: string[];
  eventTypes?: string[];
}

/** A scope as a scoped portal session is minted with: at least one of the two parts. */
export const eventScopeSchema = z
  .strictObject({
    channels: channelsSchema.pipe(z.array(z.string()).min(1)).optional(),
    event_types: z.array(eventPatternSchema).min(1).max(50).optional(),
  })
  .refine((s) => s.channels !== undefined || s.event_types !== undefined, 'name channels, event_types or both')
  .transform((s): EventScope => ({ channels: s.channels?.sort(), eventTypes: s.event_types && [...new Set(s.event_types)].sort() }));

/** What matching reads of an event: its type, alias and channels. */
export interface ScopedEvent extends MatchableEvent {
  channels: string[];
}

/**
 * The one confinement rule, for every face (REST, GraphQL, streams) and worker (fan-out,
 * first attempts, replay): an event is in every one of `scopes` (undefined ones are no bound).
 */
export function compileEventScope(...scopes: (EventScope | undefined)[]): (event: ScopedEvent) => boolean {
  const tests = scopes.flatMap((s) => {
    if (!s) return [];
    const out: ((e: ScopedEvent) => boolean)[] = [];
    if (s.eventTypes) out.push(compileEventTypePatterns(s.eventTypes));
    if (s.channels) {
      const wanted = new Set(s.channels);
      out.push((e) => e.channels.some((c) => wanted.has(c)));
    }
    return out;
  });
  return (e) => tests.every((t) => t(e));
}

/**
 * The SQL side of the channel half of the rule, for ledger reads: events on one of each
 * scope's channels (served by the channels index). Type patterns are left to the predicate.
 */
export function channelConditions(sql: Sql, alias: string, ...scopes: (EventScope | undefined)[]) {
  return scopes.flatMap((s) => (s?.channels ? [sql`${sql(alias)}.channels && ${s.channels}::text[]`] : []));
}

/** A scope as stored (jsonb) and answered: snake_case, absent parts left out. */
export const storedScope = (s: EventScope | undefined) =>
  s ? { ...(s.channels ? { channels: s.channels } : {}), ...(s.eventTypes ? { event_types: s.eventTypes } : {}) } : null;

/** A stored scope back as an EventScope. */
export const scopeFromStored = (s: { channels?: string[]; event_types?: string[] } | null): EventScope | undefined =>
  s ? { channels: s.channels, eventTypes: s.event_types } : undefined;

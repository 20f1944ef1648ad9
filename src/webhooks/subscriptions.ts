import { z } from 'zod';
import type { Deps } from '../deps.js';
import { fail, ok, type Result } from '../errors.js';
import { channelsSchema, type EventScope, storedScope } from '../ledger/event-scope.js';
import { eventPatternSchema } from '../ledger/event-type-match.js';
import { generateSecret } from './signing.js';
import { publishSubscriptionsChanged, type StoredScope, subscriptionMatcher, type SubscriptionStatus } from './subscription-cache.js';
import { destinationChange, destinationInput, type DestinationOutput } from '../destinations/inputs.js';
import {
  DESTINATION_COLUMNS,
  type DestinationWrite,
  openDestination,
  prepareDestination,
  publicDestination,
  type StoredDestinationColumns,
} from './destination-columns.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (s: string) => UUID.test(s);

const pattern = eventPatternSchema;
const patterns = z.array(pattern).min(1).max(50);
const channels = channelsSchema
  .pipe(z.array(z.string()).min(1))
  .nullish()
  .describe('only events carrying one of these channels; null or absent: any');

const targetUrl = z.string().min(1).max(2048).describe('the HTTP receiver of a webhook destination; absent for a broker');

export const createSubscriptionInput = z.strictObject({
  name: z.string().trim().min(1).max(200),
  target_url: targetUrl.optional(),
  destination: destinationInput.optional(),
  event_patterns: patterns,
  channels,
  /** Omitted: the service generates one and returns it once. */
  secret: z.string().min(16, 'must be at least 16 characters').max(256).optional(),
  /** Deliveries per second this receiver accepts; more wait in the queue. */
  max_per_second: z.number().int().min(1).max(10_000).nullish(),
});
export type CreateSubscriptionInput = z.infer<typeof createSubscriptionInput>;

export const updateSubscriptionInput = z.strictObject({
  name: z.string().trim().min(1).max(200).optional(),
  target_url: targetUrl.optional(),
  /** Replaces the destination whole; a broker's URL (with its credentials) may be left out to keep it. */
  destination: destinationChange.optional(),
  event_patterns: patterns.optional(),
  channels,
  // DISABLED is the service's verdict on a failing endpoint, not something a client sets.
  status: z.enum(['ACTIVE', 'PAUSED']).optional(),
  max_per_second: z.number().int().min(1).max(10_000).nullish(),
});
export type UpdateSubscriptionInput = z.infer<typeof updateSubscriptionInput>;

interface Row extends StoredDestinationColumns {
  id: string;
  name: string;
  target_url: string;
  event_patterns: string[];
  channels: string[] | null;
  scope: StoredScope;
  status: SubscriptionStatus;
  max_per_second: number | null;
  consecutive_failures: number;
  previous_expires_at: Date | null;
  disabled_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** A subscription in REST names; the secret is write-only and never part of it. */
export interface PublicSubscription {
  id: string;
  name: string;
  /** A webhook's receiver; a broker destination's URL without credentials. */
  target_url: string;
  destination: DestinationOutput;
  event_patterns: string[];
  channels: string[] | null;
  /** The scoped portal session's scope it was made in, which it never matches outside; null: made unscoped. */
  scope: StoredScope;
  status: SubscriptionStatus;
  max_per_second: number | null;
  consecutive_failures: number;
  /** Until when deliveries are also signed with the secret before the last rotation. */
  previous_secret_expires_at: string | null;
  disabled_at: string | null;
  created_at: string;
  updated_at: string;
}

const COLUMNS = `id, name, target_url, event_patterns, channels, scope, status, max_per_second, consecutive_failures, previous_expires_at,
   disabled_at, created_at, updated_at, ${DESTINATION_COLUMNS}`;

function toPublic(r: Row): PublicSubscription {
  const live = r.previous_expires_at && r.previous_expires_at.getTime() > Date.now() ? r.previous_expires_at.toISOString() : null;
  return {
    id: r.id,
    name: r.name,
    target_url: r.target_url,
    destination: publicDestination(r),
    event_patterns: r.event_patterns,
    channels: r.channels,
    scope: r.scope,
    status: r.status,
    max_per_second: r.max_per_second,
    consecutive_failures: r.consecutive_failures,
    previous_secret_expires_at: live,
    disabled_at: r.disabled_at?.toISOString() ?? null,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

const notFound = (id: string) => fail('NOT_FOUND', `No webhook subscription ${id}`);

/**
 * The subscriptions a confined reader may see and manage: those made in its very scope. An
 * unscoped one (your own team) sees them all.
 */
function within(deps: Deps, scope: EventScope | undefined, column = 'scope') {
  const { sql } = deps;
  return scope === undefined ? sql`` : sql`AND ${sql(column)} = ${sql.json(storedScope(scope)!)}::jsonb`;
}

/** Whether subscription `id` is one a reader confined to `scope` may see (always, unscoped). */
export async function subscriptionWithin(deps: Deps, appId: string, id: string, scope: EventScope | undefined): Promise<boolean> {
  if (scope === undefined) return true;
  if (!isUuid(id)) return false;
  const rows = await deps.sql`SELECT 1 FROM webhook_subscriptions WHERE app_id = ${appId} AND id = ${id} ${within(deps, scope)}`;
  return rows.length > 0;
}

/** Whether delivery `id` belongs to a subscription a reader confined to `scope` may see. */
export async function deliveryWithin(deps: Deps, appId: string, id: string, scope: EventScope | undefined): Promise<boolean> {
  if (scope === undefined) return true;
  if (!isUuid(id)) return false;
  const rows = await deps.sql`
    SELECT 1 FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id AND s.app_id = d.app_id
     WHERE d.app_id = ${appId} AND d.id = ${id} ${within(deps, scope, 's.scope')}`;
  return rows.length > 0;
}

/** Creates a subscription; one made by a confined reader stores its scope and never matches outside it. */
export async function createSubscription(
  deps: Deps,
  appId: string,
  input: CreateSubscriptionInput,
  scope?: EventScope,
): Promise<Result<PublicSubscription & { secret?: string }>> {
  const dest = prepareDestination(deps, input.destination, input.target_url);
  if (!dest.ok) return dest;
  const { destination, targetUrl, config, secretSealed } = dest.value;
  const generated = input.secret === undefined ? generateSecret() : undefined;
  const secret = input.secret ?? generated!;
  const [row] = await deps.sql<Row[]>`
    INSERT INTO webhook_subscriptions (app_id, name, target_url, event_patterns, channels, scope, secret_sealed, max_per_second,
                                       destination, destination_config, destination_secret_sealed)
    VALUES (${appId}, ${input.name}, ${targetUrl}, ${input.event_patterns}, ${input.channels ?? null},
            ${scope ? deps.sql.json(storedScope(scope)!) : null}, ${deps.secrets.seal(secret)}, ${input.max_per_second ?? null},
            ${destination}, ${config ? deps.sql.json(config as never) : null}, ${secretSealed})
    RETURNING ${deps.sql.unsafe(COLUMNS)}`;
  await publishSubscriptionsChanged(deps, appId);
  return ok({ ...toPublic(row), ...(generated ? { secret: generated } : {}) });
}

export async function listSubscriptions(deps: Deps, appId: string, scope?: EventScope): Promise<PublicSubscription[]> {
  const rows = await deps.sql<
    Row[]
  >`SELECT ${deps.sql.unsafe(COLUMNS)} FROM webhook_subscriptions WHERE app_id = ${appId} ${within(deps, scope)} ORDER BY created_at, id`;
  return rows.map(toPublic);
}

export async function getSubscription(deps: Deps, appId: string, id: string): Promise<Result<PublicSubscription>> {
  if (!isUuid(id)) return notFound(id);
  const [row] = await deps.sql<Row[]>`SELECT ${deps.sql.unsafe(COLUMNS)} FROM webhook_subscriptions WHERE app_id = ${appId} AND id = ${id}`;
  return row ? ok(toPublic(row)) : notFound(id);
}

export async function updateSubscription(
  deps: Deps,
  appId: string,
  id: string,
  patch: UpdateSubscriptionInput,
): Promise<Result<PublicSubscription>> {
  if (!isUuid(id)) return notFound(id);
  const { sql } = deps;
  let dest: DestinationWrite | undefined;
  if (patch.destination !== undefined || patch.target_url !== undefined) {
    // The stored destination decides a change that keeps part of it (a broker's URL, a webhook's kind).
    const keeps = patch.destination === undefined || (patch.destination.kind !== 'webhook' && patch.destination.url === undefined);
    let current: StoredDestinationColumns | undefined;
    if (keeps) {
      [current] = await sql<StoredDestinationColumns[]>`
        SELECT id, target_url, ${sql.unsafe(DESTINATION_COLUMNS)} FROM webhook_subscriptions WHERE app_id = ${appId} AND id = ${id}`;
      if (!current) return notFound(id);
    }
    const prepared = prepareDestination(deps, patch.destination, patch.target_url, current);
    if (!prepared.ok) return prepared;
    dest = prepared.value;
  }
  const [row] = await sql<Row[]>`
    UPDATE webhook_subscriptions SET
      name = COALESCE(${patch.name ?? null}, name),
      target_url = COALESCE(${dest?.targetUrl ?? null}, target_url),
      destination = COALESCE(${dest?.destination ?? null}, destination),
      destination_config = ${dest ? (dest.config ? sql.json(dest.config as never) : null) : sql`destination_config`},
      destination_secret_sealed = ${dest ? dest.secretSealed : sql`destination_secret_sealed`},
      event_patterns = COALESCE(${patch.event_patterns ?? null}::text[], event_patterns),
      channels = ${patch.channels === undefined ? sql`channels` : patch.channels},
      max_per_second = ${patch.max_per_second === undefined ? sql`max_per_second` : patch.max_per_second},
      status = COALESCE(${patch.status ?? null}, status),
      -- Re-activating (from PAUSED or DISABLED) starts the failure count afresh.
      consecutive_failures = CASE WHEN ${patch.status ?? null}::text = 'ACTIVE' THEN 0 ELSE consecutive_failures END,
      disabled_at = CASE WHEN ${patch.status ?? null}::text IS NOT NULL THEN NULL ELSE disabled_at END,
      updated_at = now()
    WHERE app_id = ${appId} AND id = ${id}
    RETURNING ${sql.unsafe(COLUMNS)}`;
  if (!row) return notFound(id);
  await publishSubscriptionsChanged(deps, appId);
  return ok(toPublic(row));
}

export async function deleteSubscription(deps: Deps, appId: string, id: string): Promise<Result<true>> {
  if (!isUuid(id)) return notFound(id);
  const rows = await deps.sql`DELETE FROM webhook_subscriptions WHERE app_id = ${appId} AND id = ${id} RETURNING id`;
  if (rows.length === 0) return notFound(id);
  await publishSubscriptionsChanged(deps, appId);
  return ok(true);
}

/**
 * Replaces the secret with a fresh one. For WEBHOOK_SECRET_OVERLAP_MS the old secret keeps
 * signing beside the new one, so a receiver can switch without rejecting a delivery.
 */
export async function rotateSecret(
  deps: Deps,
  appId: string,
  id: string,
): Promise<Result<{ secret: string; previous_secret_expires_at: string }>> {
  if (!isUuid(id)) return notFound(id);
  const secret = generateSecret();
  const overlap = deps.config.WEBHOOK_SECRET_OVERLAP_MS;
  const [row] = await deps.sql<{ previous_expires_at: Date }[]>`
    UPDATE webhook_subscriptions SET
      previous_secret_sealed = secret_sealed,
      previous_expires_at = now() + ${overlap} * interval '1 millisecond',
      secret_sealed = ${deps.secrets.seal(secret)},
      updated_at = now()
    WHERE app_id = ${appId} AND id = ${id}
    RETURNING previous_expires_at`;
  if (!row) return notFound(id);
  await publishSubscriptionsChanged(deps, appId);
  return ok({ secret, previous_secret_expires_at: row.previous_expires_at.toISOString() });
}

/** The subscription's send settings read straight from the database (test sends, replays). */
export async function loadSubscriptionForSend(deps: Deps, appId: string, id: string) {
  if (!isUuid(id)) return undefined;
  const [row] = await deps.sql<
    {
      id: string;
      target_url: string;
      status: SubscriptionStatus;
      event_patterns: string[];
      channels: string[] | null;
      scope: StoredScope;
      secret_sealed: string;
      previous_secret_sealed: string | null;
      previous_expires_at: Date | null;
    }[] &
      StoredDestinationColumns[]
  >`
    SELECT id, target_url, status, event_patterns, channels, scope, secret_sealed, previous_secret_sealed, previous_expires_at,
           ${deps.sql.unsafe(DESTINATION_COLUMNS)}
      FROM webhook_subscriptions WHERE app_id = ${appId} AND id = ${id}`;
  if (!row) return undefined;
  const secrets = [deps.secrets.open(row.secret_sealed)];
  if (row.previous_secret_sealed && row.previous_expires_at && row.previous_expires_at.getTime() > Date.now())
    secrets.push(deps.secrets.open(row.previous_secret_sealed));
  return {
    id: row.id,
    destination: openDestination(deps.secrets, row),
    status: row.status,
    matches: subscriptionMatcher(row),
    secrets,
  };
}

import type { Deps } from '../deps.js';
import { compileEventScope, type ScopedEvent, scopeFromStored } from '../ledger/event-scope.js';
import { announceChange, watchChanges } from '../change-feed.js';
import { createSigner, type Signer } from './signing.js';
import { DESTINATION_COLUMNS, openDestination, type StoredDestinationColumns } from './destination-columns.js';
import type { Destination } from '../destinations/senders.js';

export type SubscriptionStatus = 'ACTIVE' | 'PAUSED' | 'DISABLED';

/** A subscription's scope as stored: that of the scoped portal session it was made in, or null. */
export type StoredScope = { channels?: string[]; event_types?: string[] } | null;

/**
 * What a subscription delivers: events its patterns and channels select, and never one outside
 * the scope it was made in (src/ledger/event-scope.ts), whoever edits its patterns later. The
 * fan-out, first attempts and replay all match with this.
 */
export const subscriptionMatcher = (r: { event_patterns: string[]; channels: string[] | null; scope: StoredScope }) =>
  compileEventScope({ eventTypes: r.event_patterns, channels: r.channels ?? undefined }, scopeFromStored(r.scope));

/** What matching and sending need of a subscription, secrets already opened. */
export interface CachedSubscription {
  id: string;
  appId: string;
  name: string;
  targetUrl: string;
  /** Where its deliveries go (its target URL, or a broker with its URL opened). */
  destination: Destination;
  status: SubscriptionStatus;
  /** Its patterns, channels and the scope it was made in (subscriptionMatcher). */
  matches: (event: ScopedEvent) => boolean;
  /** Signs with the current secret alone. */
  signer: Signer;
  /** Signs with the current and the previous secret, until `previousExpiresAt`. */
  rotationSigner?: Signer;
  /** Epoch ms after which the previous secret stops signing. */
  previousExpiresAt?: number;
  maxPerSecond: number | null;
}

/** The signer at `now`: both secrets while the previous one's window lasts, then the current one alone. */
export function signerFor(sub: CachedSubscription, now = Date.now()): Signer {
  return sub.rotationSigner && (sub.previousExpiresAt ?? 0) > now ? sub.rotationSigner : sub.signer;
}

/** Tells every process's cache to reload an application's subscriptions. */
export const publishSubscriptionsChanged = (deps: Deps, appId: string): Promise<void> =>
  announceChange(deps, 'webhook-subscriptions', appId);

/** Upper bound on staleness should an invalidation be lost (it is only a safety net). */
const CACHE_TTL_MS = 30_000;

export interface SubscriptionCache {
  /** Every subscription of each application (any status), loading the missing ones in one query. */
  forApps(appIds: string[]): Promise<Map<string, CachedSubscription[]>>;
  get(appId: string, subscriptionId: string): Promise<CachedSubscription | undefined>;
  invalidate(appId: string): void;
  /** Called after an announced change dropped an application's entry (`undefined`: every application's). */
  onChange(listener: (appId: string | undefined) => void): void;
  /** Resolves once the invalidation channel is subscribed. */
  ready: Promise<void>;
  close(): Promise<void>;
}

interface Row extends StoredDestinationColumns {
  id: string;
  app_id: string;
  name: string;
  target_url: string;
  event_patterns: string[];
  channels: string[] | null;
  scope: StoredScope;
  status: SubscriptionStatus;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_expires_at: Date | null;
  max_per_second: number | null;
}

/**
 * Per-process cache of each application's subscriptions, so matching an event never loads
 * every subscription. A change anywhere publishes the application id on Redis and every
 * process drops its copy. A load that raced an invalidation is not stored (generation
 * check), and a reconnect of the subscriber drops everything (messages may have been missed
 * while it was away).
 */
export function createSubscriptionCache(deps: Deps): SubscriptionCache {
  const entries = new Map<string, { subs: CachedSubscription[]; at: number }>();
  const generations = new Map<string, number>();
  let epoch = 0;
  const genOf = (appId: string) => `${epoch}:${generations.get(appId) ?? 0}`;
  const invalidate = (appId: string) => {
    entries.delete(appId);
    generations.set(appId, (generations.get(appId) ?? 0) + 1);
  };

  const listeners: ((appId: string | undefined) => void)[] = [];
  const watch = watchChanges(deps, 'webhook-subscriptions', (appId) => {
    if (appId) invalidate(appId);
    else {
      epoch++;
      entries.clear();
    }
    for (const l of listeners) l(appId || undefined);
  });

  // Secrets are opened and their signing keys prepared once per load, not per delivery.
  const toCached = (r: Row): CachedSubscription => {
    const secret = deps.secrets.open(r.secret_sealed);
    return {
      id: r.id,
      appId: r.app_id,
      name: r.name,
      targetUrl: r.target_url,
      destination: openDestination(deps.secrets, r),
      status: r.status,
      matches: subscriptionMatcher(r),
      signer: createSigner([secret]),
      ...(r.previous_secret_sealed && r.previous_expires_at
        ? {
            rotationSigner: createSigner([secret, deps.secrets.open(r.previous_secret_sealed)]),
            previousExpiresAt: r.previous_expires_at.getTime(),
          }
        : {}),
      maxPerSecond: r.max_per_second,
    };
  };

  const forApps: SubscriptionCache['forApps'] = async (appIds) => {
    const now = Date.now();
    const out = new Map<string, CachedSubscription[]>();
    const missing: string[] = [];
    for (const appId of appIds) {
      const e = entries.get(appId);
      if (e && now - e.at < CACHE_TTL_MS) out.set(appId, e.subs);
      else missing.push(appId);
    }
    if (missing.length === 0) return out;
    const before = new Map(missing.map((a) => [a, genOf(a)]));
    const rows = await deps.sql<Row[]>`
      SELECT id, app_id, name, target_url, event_patterns, channels, scope, status, secret_sealed, previous_secret_sealed,
             previous_expires_at, max_per_second, ${deps.sql.unsafe(DESTINATION_COLUMNS)}
        FROM webhook_subscriptions WHERE app_id = ANY(${missing}::uuid[]) ORDER BY created_at, id`;
    for (const appId of missing) out.set(appId, []);
    for (const r of rows) out.get(r.app_id)!.push(toCached(r));
    for (const appId of missing) if (genOf(appId) === before.get(appId)) entries.set(appId, { subs: out.get(appId)!, at: now });
    return out;
  };

  return {
    forApps,
    async get(appId, subscriptionId) {
      const find = async () => {
        // The hot path (every delivery asks): a fresh entry is read without building a result map.
        const e = entries.get(appId);
        const subs = e && Date.now() - e.at < CACHE_TTL_MS ? e.subs : (await forApps([appId])).get(appId);
        return subs?.find((s) => s.id === subscriptionId);
      };
      const hit = await find();
      if (hit) return hit;
      // Created after this process cached the application: look again once.
      invalidate(appId);
      return find();
    },
    invalidate,
    onChange: (listener) => void listeners.push(listener),
    ready: watch.ready,
    async close() {
      entries.clear();
      await watch.close();
    },
  };
}

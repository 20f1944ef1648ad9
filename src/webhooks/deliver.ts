import type { Deps } from '../deps.js';
import { createGroupCommit } from '../ledger/group-commit.js';
import { createAttemptLog, type AttemptRecord, type DeliveryStatus } from './attempt-log.js';
import { batchLoader } from '../tick-batch.js';
import { deliveryBodies, loadBodyEvents } from './body.js';
import { deliveryIdOf } from './fan-out.js';
import { enqueueDeliveryRuns, type DeliveryRun } from './delivery-queue.js';
import { createWebhookHttpClient, type WebhookHttpClient } from './http-client.js';
import { createSenders, senderOptions } from '../destinations/senders.js';
import { createInFlightBound, type InFlightSlot } from '../destinations/in-flight.js';
import { parseRetryAfter, retryDelay } from './retry-policy.js';
import { signerFor, type CachedSubscription, type SubscriptionCache } from './subscription-cache.js';
import { takeDeliverySlot } from './throttle.js';
import type { LocalFirstAttempts } from './local-deliverer.js';
import type { ActiveSpan, SpanOptions } from '../tracing/index.js';

interface DeliveryRow {
  /** True for an event's first attempt: the row is written together with the outcome. */
  isNew?: boolean;
  id: string;
  app_id: string;
  subscription_id: string;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  body: string;
  attempt_count: number;
  run: number;
  first_attempt_ts: string | null;
}

/** What one attempt came to; the worker turns it into BullMQ's terms. */
export type AttemptOutcome =
  | { kind: 'skipped'; reason: string }
  | { kind: 'wait'; ms: number }
  | { kind: 'delivered'; attempt: number; statusCode: number | null }
  | { kind: 'retry'; attempt: number; error: string; retryAfterMs?: number; delayMs: number }
  | { kind: 'failed'; attempt: number; error: string };

export interface Deliverer {
  /**
   * Creates and makes the first attempt of every delivery of one event, concurrently: each
   * matching active subscription without a delivery of it gets one, written together with the
   * attempt's outcome. A failure with attempts left continues as a run of its own (a delayed
   * job on the custom backoff); a throttled delivery as a run that starts when its slot comes.
   */
  firstAttempts(job: { eventId: string; appId: string; trace?: string }): Promise<AttemptOutcome[]>;
  /**
   * One attempt of one delivery run; `lastAttempt` says whether a failure is final, and
   * `schedulePosition` which of WEBHOOK_RETRY_DELAYS_MS the next retry waits.
   */
  attempt(job: {
    deliveryId: string;
    appId: string;
    run: number;
    lastAttempt: boolean;
    schedulePosition: number;
    queuedAt: number;
  }): Promise<AttemptOutcome>;
  /** Takes first attempts in process (the ledger's fast path), at most `limit` events at once. */
  local(limit: number): LocalFirstAttempts;
  http: WebhookHttpClient;
  close(): Promise<void>;
}

/** Extra headers a receiver sees on a retry (docs/webhook-receiver.md). */
export function retryHeaders(attempt: number, originalTs: number): Record<string, string> {
  return attempt > 1 ? { 'x-service-retry-count': String(attempt - 1), 'x-service-original-timestamp': String(originalTs) } : {};
}

/** Whether a subscription read again still delivers where `before` did. */
function stillDelivers(before: CachedSubscription, now: CachedSubscription | undefined): boolean {
  if (now?.status !== 'ACTIVE') return false;
  // Both are built by openDestination from the stored columns: the same destination serialises the same.
  return now.destination === before.destination || JSON.stringify(now.destination) === JSON.stringify(before.destination);
}

/** How soon a run whose delivery is being attempted in this process looks again. */
const IN_PROGRESS_RECHECK_MS = 250;

/** How long a run waits for its delivery row to appear before concluding it was deleted. */
const MISSING_ROW_PATIENCE_MS = 120_000;

const COLUMNS = 'd.id, d.app_id, d.subscription_id, d.event_id, d.event_type, d.status, d.body, d.attempt_count, d.run, d.first_attempt_ts';

/**
 * The delivery side of outbound webhooks. Rows are read with one query per tick however many
 * jobs ask, the subscription comes from the process cache, the stored body is signed and
 * POSTed through a keep-alive pool, and outcomes are written by a shared group commit: no
 * per-delivery subscription load and no per-delivery transaction.
 */
export function createDeliverer(deps: Deps, cache: SubscriptionCache): Deliverer {
  const schedule = deps.config.WEBHOOK_RETRY_DELAYS_MS;
  const http = createWebhookHttpClient({ policy: deps.config.OUTBOUND_ADDRESS_POLICY, timeoutMs: deps.config.WEBHOOK_TIMEOUT_MS });
  // HTTP or a broker, by the subscription's destination: one outcome shape, so retries, logs and dead-lettering are shared.
  const senders = createSenders(http, senderOptions(deps.config));
  const inFlight = createInFlightBound(
    deps.config.DESTINATION_MAX_IN_FLIGHT,
    deps.config.WEBHOOK_TIMEOUT_MS,
    deps.config.DESTINATION_STUCK_MS,
  );
  const log = createAttemptLog(deps);
  // A subscription changed elsewhere: a broker connection it no longer uses is closed now, not when idle.
  const retireStale = async (appId: string) => {
    const subs = (await cache.forApps([appId])).get(appId) ?? [];
    senders.retire(
      appId,
      subs.filter((s) => s.status === 'ACTIVE').map((s) => s.destination),
    );
  };
  cache.onChange((appId) => {
    const brokerApps = senders.brokerApps();
    // Only applications this process holds broker connections for: no reload for any other change.
    for (const app of appId ? brokerApps.filter((a) => a === appId) : brokerApps)
      retireStale(app).catch((err) =>
        deps.logger.warn({ err, appId: app }, 'could not close the broker connections of changed subscriptions'),
      );
  });
  const queueRuns = createGroupCommit<DeliveryRun, void>((runs) => enqueueDeliveryRuns(deps, runs), 500);
  /**
   * Deliveries whose attempt runs in this process, until its outcome is written (or its run
   * queued). A job run a second time while its first run is still going (BullMQ hands out
   * again a job whose lock lapsed while the event loop was held) finds no row yet, and must
   * not send them again.
   */
  const attempting = new Set<string>();
  const exclusively = async <T>(id: string, fn: () => Promise<T>): Promise<T> => {
    attempting.add(id);
    try {
      return await fn();
    } finally {
      attempting.delete(id);
    }
  };
  /** `fn` in a span when tracing is on; as it is otherwise. */
  const traced = <T>(name: string, options: SpanOptions, fn: (span?: ActiveSpan) => Promise<T>): Promise<T> =>
    deps.tracing ? deps.tracing.span(name, options, fn) : fn();

  const pairs = (keys: string[]) => {
    const split = keys.map((k) => k.split('/'));
    return [split.map((p) => p[0]), split.map((p) => p[1])];
  };
  const loadOne = batchLoader<string, DeliveryRow>(async (keys) => {
    const [apps, ids] = pairs(keys);
    const rows = await deps.sql<DeliveryRow[]>`
      SELECT ${deps.sql.unsafe(COLUMNS)}
        FROM unnest(${apps}::uuid[], ${ids}::uuid[]) AS k(app_id, id)
        JOIN webhook_deliveries d ON d.app_id = k.app_id AND d.id = k.id
       WHERE d.id = ANY(${ids}::uuid[])`;
    return new Map(rows.map((r) => [`${r.app_id}/${r.id}`, r]));
  });
  const loadEvent = batchLoader<string, Awaited<ReturnType<typeof loadBodyEvents>> extends Map<string, infer V> ? V : never>(
    async (keys) => {
      const [apps, ids] = pairs(keys);
      const found = await loadBodyEvents(
        deps.sql,
        ids.map((id, i) => ({ app_id: apps[i], id })),
      );
      return new Map([...found.values()].map((e) => [`${e.app_id}/${e.id}`, e]));
    },
  );

  const record = (
    d: DeliveryRow,
    r: Omit<AttemptRecord, 'deliveryId' | 'appId' | 'subscriptionId' | 'eventId' | 'eventType' | 'requestBody'>,
  ) =>
    log.record({
      deliveryId: d.id,
      appId: d.app_id,
      subscriptionId: d.subscription_id,
      eventId: d.event_id,
      eventType: d.event_type,
      requestBody: null,
      ...(d.isNew ? { newDelivery: { body: d.body } } : {}),
      ...r,
    });

  /**
   * One attempt of a loaded delivery. `beforeRecord` runs between the answer and the write of
   * the outcome: a first attempt queues its retry there, so a crash can repeat a send (at
   * least once) but never strand a delivery in `retrying` with no job to retry it.
   */
  function attemptRow(
    d: DeliveryRow,
    lastAttempt: boolean,
    schedulePosition: number,
    beforeRecord?: (o: AttemptOutcome) => Promise<void>,
  ): Promise<AttemptOutcome> {
    const attributes = {
      'gateway.delivery_id': d.id,
      'gateway.subscription_id': d.subscription_id,
      'gateway.event_id': d.event_id,
      'gateway.app_id': d.app_id,
      'gateway.webhook.attempt': d.attempt_count + 1,
    };
    return traced('webhook attempt', { attributes }, async (span) => {
      const outcome = await attemptRowUntraced(d, lastAttempt, schedulePosition, beforeRecord);
      span?.setAttributes({
        'gateway.webhook.outcome': outcome.kind,
        'http.response.status_code': 'statusCode' in outcome ? (outcome.statusCode ?? undefined) : undefined,
      });
      if (outcome.kind === 'retry' || outcome.kind === 'failed') span?.fail(outcome.error);
      return outcome;
    });
  }

  async function attemptRowUntraced(
    d: DeliveryRow,
    lastAttempt: boolean,
    schedulePosition: number,
    beforeRecord?: (o: AttemptOutcome) => Promise<void>,
  ): Promise<AttemptOutcome> {
    if (d.status === 'delivered' || d.status === 'failed') return { kind: 'skipped', reason: `already ${d.status}` };
    const sub = await cache.get(d.app_id, d.subscription_id);
    if (!sub) return { kind: 'skipped', reason: 'subscription deleted' };
    if (sub.status !== 'ACTIVE') {
      // Paused or disabled since it was queued: not sent (resuming must not flood), kept as failed for replay.
      const error = `not sent: subscription is ${sub.status}`;
      await record(d, {
        status: 'failed',
        attempt: d.attempt_count,
        statusCode: null,
        durationMs: 0,
        error,
        responseBody: null,
        firstAttemptTs: null,
        affectsHealth: false,
      });
      return { kind: 'failed', attempt: d.attempt_count, error };
    }
    if (sub.maxPerSecond) {
      const wait = await takeDeliverySlot(deps.redis, deps.config.REDIS_PREFIX, sub.id, sub.maxPerSecond);
      if (wait > 0) return { kind: 'wait', ms: wait };
    }

    // A broker destination at its in-flight bound: in line while it answers, else back later (no attempt spent).
    let slot: InFlightSlot | undefined;
    if (sub.destination.kind !== 'webhook') {
      slot = await inFlight.take(sub.destination.subscriptionId);
      if (!slot.taken) return { kind: 'wait', ms: slot.waitMs };
      // Paused, deleted or pointed elsewhere while it waited in line: sent by a run of its own,
      // which looks at the subscription afresh, never to where it no longer delivers.
      if (!stillDelivers(sub, await cache.get(d.app_id, d.subscription_id))) {
        slot.release();
        return { kind: 'wait', ms: 0 };
      }
    }
    const attempt = d.attempt_count + 1;
    const ts = Math.floor(Date.now() / 1000);
    const originalTs = d.first_attempt_ts !== null ? Number(d.first_attempt_ts) : ts;
    const headers = signerFor(sub)({ deliveryId: d.id, timestamp: ts, body: d.body });
    if (attempt > 1) Object.assign(headers, retryHeaders(attempt, originalTs));
    const res = await senders
      .send(sub.destination, { deliveryId: d.id, appId: d.app_id, eventType: d.event_type, body: d.body, headers })
      .finally(() => slot?.taken && slot.release());
    const { delivered, requestHeaders } = res;
    // A permanent failure (a broker's unroutable or refused message) is final at once: retrying cannot help.
    const final = lastAttempt || res.permanent === true;
    const status: DeliveryStatus = delivered ? 'delivered' : final ? 'failed' : 'retrying';
    deps.metrics.webhookAttempts.inc({ outcome: status });
    const error = res.error ?? 'failed';
    const retryAfterMs = res.statusCode === 429 || res.statusCode === 503 ? parseRetryAfter(res.headers['retry-after']) : undefined;
    const outcome: AttemptOutcome = delivered
      ? { kind: 'delivered', attempt, statusCode: res.statusCode ?? null }
      : final
        ? { kind: 'failed', attempt, error }
        : {
            kind: 'retry',
            attempt,
            error,
            delayMs: retryDelay(schedule, schedulePosition, retryAfterMs),
            ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
          };
    await beforeRecord?.(outcome);
    await record(d, {
      status,
      attempt,
      statusCode: res.statusCode ?? null,
      durationMs: res.durationMs,
      error: res.error ?? null,
      responseBody: res.statusCode !== undefined ? res.responseBody : null,
      requestHeaders,
      responseHeaders: res.statusCode !== undefined ? res.headers : null,
      nextRetryAt: outcome.kind === 'retry' ? new Date(Date.now() + outcome.delayMs) : null,
      firstAttemptTs: originalTs,
      affectsHealth: true,
    });
    return outcome;
  }

  // Traced under the event's own request (its trace), linked to the commit or job it runs in.
  const firstAttempts: Deliverer['firstAttempts'] = ({ eventId, appId, trace }) =>
    traced('webhook first-attempts', { parent: trace, attributes: { 'gateway.event_id': eventId, 'gateway.app_id': appId } }, () =>
      firstAttemptsUntraced(eventId, appId),
    );

  const firstAttemptsUntraced = async (eventId: string, appId: string): Promise<AttemptOutcome[]> => {
    const event = await loadEvent(`${appId}/${eventId}`);
    if (!event) return [];
    const subs = (await cache.forApps([appId])).get(appId) ?? [];
    const have = new Set(event.delivered_to);
    const bodyOf = deliveryBodies(event, new Date());
    const lastAttempt = schedule.length <= 1;
    // Subscriptions that already have a delivery of this event (an earlier run of this job,
    // a replay) are left to it: this job never sends one twice.
    const rows: DeliveryRow[] = subs
      .filter((sub) => sub.status === 'ACTIVE' && sub.matches(event) && !have.has(sub.id))
      .map((sub) => ({ sub, id: deliveryIdOf(sub.id, event.id) }))
      // Being attempted by an earlier run of this job, still going: that run writes its outcome.
      .filter(({ id }) => !attempting.has(id))
      .map(({ sub, id }) => {
        const body = bodyOf(id, sub.id);
        return {
          isNew: true,
          id,
          app_id: appId,
          subscription_id: sub.id,
          event_id: event.id,
          event_type: event.event_type,
          status: 'pending',
          body,
          attempt_count: 0,
          run: 0,
          first_attempt_ts: null,
        };
      });
    return Promise.all(
      rows.map((d) =>
        exclusively(d.id, async () => {
          const outcome = await attemptRow(d, lastAttempt, 1, async (o) => {
            // Queued before the outcome is written: a crash in between repeats a send (at least once)
            // but never strands a delivery in `retrying` with no job to retry it.
            if (o.kind === 'retry') await queueRuns({ id: d.id, app_id: d.app_id, run: 0, attempt_base: 1, delayMs: o.delayMs });
          });
          if (outcome.kind === 'wait') {
            // Over its throttle or its destination's in-flight bound: queued as a run of its own, no
            // attempt spent, then stored as pending. Queued first, as a retry is: should the write
            // or this process fail in between, the run waits for its row instead of the row
            // waiting forever for a run (the safety net skips a subscription the event names).
            await queueRuns({ id: d.id, app_id: d.app_id, run: 0, attempt_base: 0, delayMs: outcome.ms });
            await record(d, {
              status: 'pending',
              attempt: 0,
              statusCode: null,
              durationMs: 0,
              error: null,
              responseBody: null,
              firstAttemptTs: null,
              affectsHealth: false,
              log: false,
            });
          }
          return outcome;
        }),
      ),
    );
  };

  return {
    http,
    firstAttempts,
    local(limit) {
      // Events whose in-process first attempts are running: a repeated hook call never starts them twice.
      const inFlight = new Set<string>();
      return {
        take(events) {
          const taken = events.filter((e) => !inFlight.has(e.event_id) && inFlight.size < limit);
          const runs = taken.map((e) => {
            inFlight.add(e.event_id);
            return firstAttempts({ eventId: e.event_id, appId: e.app_id, trace: e.trace })
              .then(
                () => true,
                (err) => {
                  deps.logger.warn({ err, eventId: e.event_id }, 'in-process first attempts failed; the queued job will make them');
                  return false;
                },
              )
              .finally(() => inFlight.delete(e.event_id));
          });
          return { taken, done: Promise.all(runs).then((ok) => ok.every(Boolean)) };
        },
      };
    },
    async attempt({ deliveryId, appId, run, lastAttempt, schedulePosition, queuedAt }) {
      const d = await loadOne(`${appId}/${deliveryId}`);
      if (!d) {
        // A retry queued just before its first attempt's outcome was written: wait for the row.
        return Date.now() - queuedAt < MISSING_ROW_PATIENCE_MS
          ? { kind: 'wait', ms: 250 }
          : { kind: 'skipped', reason: 'delivery no longer exists' };
      }
      if (d.run !== run) return { kind: 'skipped', reason: `superseded by run ${d.run}` };
      // Being attempted here (this job run again after a stall, or its first attempt): looked at again once that is written.
      if (attempting.has(d.id)) return { kind: 'wait', ms: IN_PROGRESS_RECHECK_MS };
      return exclusively(d.id, () => attemptRow(d, lastAttempt, schedulePosition));
    },
    async close() {
      await senders.close();
      await http.close();
    },
  };
}

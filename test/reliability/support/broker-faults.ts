import { afterAll, beforeAll, expect } from 'vitest';
import { startTestStack, type AppCredentials, type TestStack } from '../../helpers/stack.js';
import { eventually } from '../../webhooks/receiver.js';

/**
 * The service for one describe block of a broker fault test, with `env` beside the defaults
 * below; `started` receives it. `cleanups` run (last first) before it closes.
 */
export function serviceFor(
  env: Record<string, string> | (() => Record<string, string>),
  started: (s: TestStack) => void,
  cleanups: (() => Promise<unknown>)[] = [],
) {
  let s: TestStack | undefined;
  beforeAll(async () => {
    s = await startTestStack({
      workers: ['ledger', 'webhook'],
      env: {
        // Retries outlast a broker restart (about 15 s for RabbitMQ) with room to spare: nothing may end failed.
        WEBHOOK_RETRY_DELAYS_MS: '0,1000,2000,4000,8000,8000,8000,8000',
        WEBHOOK_TIMEOUT_MS: '3000',
        WEBHOOK_DISABLE_AFTER: '100000',
        RATE_LIMIT_PER_MINUTE: '100000',
        ...(typeof env === 'function' ? env() : env),
      },
    });
    started(s);
  }, 60_000);
  afterAll(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => {});
    await s?.close();
  });
}

export async function subscribe(s: TestStack, app: AppCredentials, body: Record<string, unknown>) {
  const r = await s.request('POST', '/v1/webhook-subscriptions', { auth: app, body: { name: 'sub', ...body } });
  expect(r.status, JSON.stringify(r.json)).toBe(201);
  return r.json as { id: string };
}

export async function emit(s: TestStack, app: AppCredentials, eventType: string) {
  const r = await s.request('POST', '/v1/events', { auth: app, body: { event_type: eventType, payload: {} } });
  expect(r.status).toBe(201);
  return r.json as { id: string };
}

export const deliveredCount = async (s: TestStack, subId: string) =>
  Number(
    (await s.deps.sql`SELECT count(*)::int AS n FROM webhook_deliveries WHERE subscription_id = ${subId} AND status = 'delivered'`)[0].n,
  );

/** The subscription's `n` deliveries once none is pending or retrying any more (bounded by `timeoutMs`). */
export const settledDeliveries = (s: TestStack, subId: string, n: number, timeoutMs = 90_000) =>
  eventually(
    async () => {
      const rows = await s.deps.sql<{ id: string; status: string; attempt_count: number }[]>`
        SELECT id, status, attempt_count FROM webhook_deliveries WHERE subscription_id = ${subId}`;
      return rows.length === n && rows.every((r) => r.status !== 'pending' && r.status !== 'retrying') ? rows : undefined;
    },
    timeoutMs,
    250,
  );

/**
 * How many failed attempts each delivery had that may have reached the broker all the same:
 * any failure but a refused connect (nothing was sent) may be a publish whose confirm or ack
 * was lost with the connection, so the broker may hold a copy of it.
 */
export async function unconfirmedAttempts(s: TestStack, subId: string): Promise<Map<string, number>> {
  const unconfirmed = new Map<string, number>();
  for (const l of await s.deps.sql<{ delivery_id: string }[]>`
      SELECT delivery_id FROM webhook_delivery_logs
       WHERE subscription_id = ${subId} AND status <> 'delivered' AND error_message NOT ILIKE '%ECONNREFUSED%'
         AND error_message NOT ILIKE '%connection refused%'`)
    unconfirmed.set(l.delivery_id, (unconfirmed.get(l.delivery_id) ?? 0) + 1);
  return unconfirmed;
}

/** Each id's number of copies in `ids`, those with more than one. */
export function duplicatedIds(ids: string[]): [string, number][] {
  const copies = new Map<string, number>();
  for (const id of ids) copies.set(id, (copies.get(id) ?? 0) + 1);
  return [...copies].filter(([, n]) => n > 1);
}

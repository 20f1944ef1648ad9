import type { Deps } from '../deps.js';
import { fail, ok, type Result } from '../errors.js';
import type { DeliveryStatus } from './attempt-log.js';
import { capBody } from './http-client.js';
import { isUuid } from './subscriptions.js';

/** A delivery log row in REST names (`duration` in milliseconds). */
export interface DeliveryLog {
  id: string;
  delivery_id: string | null;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  status_code: number | null;
  attempt_count: number;
  duration: number;
  error_message: string | null;
  request_body: string;
  /** The headers as sent (signature included); null on rows written before they were kept. */
  request_headers: Record<string, string> | null;
  response_body: string | null;
  response_headers: Record<string, string | string[]> | null;
  /** When the next attempt is due, on an attempt that left its delivery `retrying`. */
  next_retry_at: string | null;
  created_at: string;
  cursor: string;
}

const encode = (n: string) => Buffer.from(`wl1|${n}`, 'utf8').toString('base64url');
function decode(raw: string): Result<string> {
  const m = /^wl1\|(\d{1,19})$/.exec(Buffer.from(raw, 'base64url').toString('utf8'));
  return m && /^[A-Za-z0-9_-]+$/.test(raw)
    ? ok(m[1])
    : fail('INVALID_CURSOR', 'Malformed cursor: pass back a cursor exactly as the service returned it');
}

/** Which page of an attempt log: newest first, after a cursor, optionally one status or one delivery. */
interface LogPageQuery {
  limit: number;
  after?: string;
  status?: DeliveryStatus;
  deliveryId?: string;
}
interface LogPage {
  logs: DeliveryLog[];
  hasMore: boolean;
}

/**
 * One page of a subscription's attempt log, newest first. The subscription must belong to the
 * application, so another tenant's id answers NOT_FOUND rather than an empty page.
 */
export async function listDeliveryLogs(deps: Deps, appId: string, subscriptionId: string, page: LogPageQuery): Promise<Result<LogPage>> {
  if (!isUuid(subscriptionId)) return fail('NOT_FOUND', `No webhook subscription ${subscriptionId}`);
  const [sub] = await deps.sql`SELECT 1 FROM webhook_subscriptions WHERE app_id = ${appId} AND id = ${subscriptionId}`;
  if (!sub) return fail('NOT_FOUND', `No webhook subscription ${subscriptionId}`);
  return deliveryLogPage(deps, appId, subscriptionId, page);
}

/** The page itself, for a caller that already knows the subscription is the application's (a delivery of it). */
export async function deliveryLogPage(deps: Deps, appId: string, subscriptionId: string, page: LogPageQuery): Promise<Result<LogPage>> {
  const { sql } = deps;
  let before: string | undefined;
  if (page.after !== undefined) {
    const c = decode(page.after);
    if (!c.ok) return c;
    before = c.value;
  }
  const rows = await sql<
    (Omit<DeliveryLog, 'cursor' | 'duration' | 'created_at' | 'request_body' | 'next_retry_at'> & {
      n: string;
      duration_ms: number;
      created_at: Date;
      next_retry_at: Date | null;
      request_body: string | null;
    })[]
  >`
    SELECT l.n::text AS n, l.id, l.delivery_id, l.event_id, l.event_type, l.status, l.status_code, l.attempt_count, l.duration_ms,
           l.error_message, COALESCE(l.request_body, d.body) AS request_body, l.response_body, l.created_at,
           l.request_headers, l.response_headers, l.next_retry_at
      FROM webhook_delivery_logs l
      LEFT JOIN webhook_deliveries d ON d.id = l.delivery_id AND d.app_id = l.app_id
     WHERE l.app_id = ${appId} AND l.subscription_id = ${subscriptionId}
       ${before !== undefined ? sql`AND l.n < ${before}::bigint` : sql``}
       ${page.status ? sql`AND l.status = ${page.status}` : sql``}
       ${page.deliveryId ? sql`AND l.delivery_id = ${page.deliveryId}` : sql``}
     ORDER BY l.n DESC
     LIMIT ${page.limit + 1}`;
  const logs = rows.slice(0, page.limit).map(({ n, duration_ms, created_at, request_body, next_retry_at, ...r }) => ({
    ...r,
    next_retry_at: next_retry_at?.toISOString() ?? null,
    request_body: capBody(request_body ?? ''),
    duration: duration_ms,
    created_at: created_at.toISOString(),
    cursor: encode(n),
  }));
  return ok({ logs, hasMore: rows.length > page.limit });
}

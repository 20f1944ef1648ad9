import type { Deps } from '../deps.js';
import { fail, ok, type Result } from '../errors.js';
import type { DeliveryStatus } from './attempt-log.js';
import { type DeliveryLog, deliveryLogPage } from './logs.js';
import { isUuid } from './subscriptions.js';

/** A delivery (one event to one subscription) in REST names: its state across every attempt and run. */
export interface Delivery {
  id: string;
  subscription_id: string;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  attempt_count: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

const COLUMNS = 'id, subscription_id, event_id, event_type, status, attempt_count, last_status_code, last_error, created_at, updated_at';

type DeliveryRow = Omit<Delivery, 'created_at' | 'updated_at'> & { created_at: Date; updated_at: Date };

const toDelivery = (r: DeliveryRow): Delivery => ({ ...r, created_at: r.created_at.toISOString(), updated_at: r.updated_at.toISOString() });

/** An event has at most one delivery per subscription: the page is the application's subscriptions, at most. */
const EVENT_DELIVERIES_LIMIT = 500;
/** Attempts shown with a delivery: five per run, so this covers many manual retries and replays. */
const ATTEMPTS_LIMIT = 100;

/** The deliveries one event caused, oldest first. An unknown or foreign event has none. */
export async function deliveriesOfEvent(deps: Deps, appId: string, eventId: string): Promise<Delivery[]> {
  if (!isUuid(eventId)) return [];
  const rows = await deps.sql<DeliveryRow[]>`
    SELECT ${deps.sql.unsafe(COLUMNS)} FROM webhook_deliveries WHERE app_id = ${appId} AND event_id = ${eventId}
     ORDER BY created_at, id LIMIT ${EVENT_DELIVERIES_LIMIT}`;
  return rows.map(toDelivery);
}

/** One delivery with its attempts, newest first (request and response as logged). */
export async function getDelivery(deps: Deps, appId: string, id: string): Promise<Result<Delivery & { attempts: DeliveryLog[] }>> {
  const missing = fail('NOT_FOUND', `No webhook delivery ${id}`);
  if (!isUuid(id)) return missing;
  const [row] = await deps.sql<DeliveryRow[]>`
    SELECT ${deps.sql.unsafe(COLUMNS)} FROM webhook_deliveries WHERE app_id = ${appId} AND id = ${id}`;
  if (!row) return missing;
  const logs = await deliveryLogPage(deps, appId, row.subscription_id, { limit: ATTEMPTS_LIMIT, deliveryId: id });
  if (!logs.ok) return missing;
  return ok({ ...toDelivery(row), attempts: logs.value.logs });
}

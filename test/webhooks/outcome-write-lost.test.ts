import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LedgerEvent } from '../../src/queues.js';
import { ledgerProcessor } from '../../workers/ledger.js';
import { createWorkerServices, type WorkerServices } from '../../workers/services.js';
import type { AppCredentials, TestStack } from '../helpers/stack.js';
import { eventually, type Receiver } from './receiver.js';
import { subscribedStack, type Subscribed } from './subscribed.js';

/**
 * An attempt's outcome write whose database session is lost (a terminated backend, a server
 * restart) after the receiver took the delivery. PostgreSQL rolled that transaction back, so
 * writing it again is safe; failing it instead leaves the delivery unwritten, and the
 * first-attempts safety net sends it a second time.
 */
let w: Subscribed;
let s: TestStack;
let a: AppCredentials;
let rx: Receiver;
let admin: postgres.Sql;
const built: WorkerServices[] = [];

beforeAll(async () => {
  w = await subscribedStack('lost.*', { workers: false });
  ({ s, app: a, rx } = w);
  admin = postgres(s.env.DATABASE_URL, { max: 2, onnotice: () => {} });
});
afterAll(async () => {
  await Promise.all(built.map((b) => b.close()));
  await admin?.end();
  await w?.close();
});

describe('an outcome write whose session is lost before it commits', () => {
  it('is written again on a new session: the delivery is recorded once and sent once', async () => {
    const ledgerOnly = createWorkerServices(s.deps, ['ledger']);
    const webhooks = createWorkerServices(s.deps, ['webhook']);
    built.push(ledgerOnly, webhooks);
    const event: LedgerEvent = { id: randomUUID(), app_id: a.appId, event_type: 'lost.x', payload: {}, edges: [], attachments: [] };
    const commit = ledgerProcessor.create(s.deps, ledgerOnly);
    await commit({ data: { event } } as Parameters<typeof commit>[0]);

    // The subscription row held FOR UPDATE: the delivery's insert waits on its foreign key check.
    const holder = await admin.reserve();
    await holder`BEGIN`;
    await holder`SELECT 1 FROM webhook_subscriptions WHERE id = ${w.subscriptionId} FOR UPDATE`;
    const attempts = webhooks.webhooks.firstAttempts({ eventId: event.id, appId: a.appId });
    attempts.catch(() => {});
    try {
      const [{ pid }] = await eventually(async () => {
        const rows = await admin<{ pid: number }[]>`
          SELECT pid FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO webhook_deliveries%'`;
        return rows.length ? rows : undefined;
      });
      expect(rx.received.filter((r) => r.json?.event_id === event.id)).toHaveLength(1);
      await admin`SELECT pg_terminate_backend(${pid})`;
    } finally {
      await holder`ROLLBACK`;
      holder.release();
    }
    expect((await attempts).map((o) => o.kind)).toEqual(['delivered']);
    const rows = await s.deps.sql`SELECT status, attempt_count FROM webhook_deliveries WHERE event_id = ${event.id}`;
    expect(rows).toEqual([{ status: 'delivered', attempt_count: 1 }]);
    const logs = await s.deps.sql`SELECT status FROM webhook_delivery_logs WHERE event_id = ${event.id}`;
    expect(logs).toEqual([{ status: 'delivered' }]);
    expect(rx.received.filter((r) => r.json?.event_id === event.id)).toHaveLength(1);
  });
});

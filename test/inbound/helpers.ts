import { catalogQueues, queueFor, QUEUE_NAMES, type QueueName } from '../../src/queues.js';
import { expect } from 'vitest';
import type { AppCredentials, TestStack } from '../helpers/stack.js';

export interface CreatedConnection {
  id: string;
  webhookUrl: string;
  /** Path of the webhook URL, to POST at the test server. */
  path: string;
}

/** Creates a connection through the public API, as a client would. */
export async function connect(
  s: TestStack,
  auth: AppCredentials,
  platform: string,
  config: Record<string, unknown>,
  name = `${platform} test`,
): Promise<CreatedConnection> {
  const r = await s.request('POST', '/v1/platform-connections', { auth, body: { platform_name: platform, name, config } });
  expect(r.status, r.text).toBe(201);
  return { id: r.json.id, webhookUrl: r.json.webhook_url, path: new URL(r.json.webhook_url).pathname };
}

export interface WebhookResponse {
  status: number;
  contentType: string | null;
  text: string;
  ms: number;
}

/** POSTs raw bytes at the receiver, as a platform does. */
export async function postWebhook(
  s: TestStack,
  path: string,
  body: string,
  headers: Record<string, string>,
  method = 'POST',
): Promise<WebhookResponse> {
  const started = performance.now();
  const r = await fetch(s.base + path, { method, headers, body: method === 'GET' ? undefined : body });
  const text = await r.text();
  return { status: r.status, contentType: r.headers.get('content-type'), text, ms: performance.now() - started };
}

/** Polls until `check` returns a value (not undefined), failing after `timeoutMs`. */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Events of an application, straight from the ledger, oldest first. */
export async function eventsOf(s: TestStack, appId: string, type?: string) {
  return s.deps.sql<
    { id: string; event_type: string; payload: any; origin_event_id: string | null; conversation_id: string | null; attachments: any[] }[]
  >`
    SELECT id, event_type, payload, origin_event_id, conversation_id, attachments FROM events
     WHERE app_id = ${appId} ${type ? s.deps.sql`AND event_type = ${type}` : s.deps.sql``} ORDER BY seq`;
}

/** Waits until the application has at least `n` events of `type`, and returns them. */
export async function waitForEvents(s: TestStack, appId: string, type: string, n = 1, timeoutMs = 10_000) {
  return eventually(
    async () => {
      const rows = await eventsOf(s, appId, type);
      return rows.length >= n ? rows : undefined;
    },
    timeoutMs,
    `${n} ${type} event(s)`,
  );
}

/** Every job the inbound queue has seen (waiting, active, done or failed). */
export async function inboundJobCount(s: TestStack): Promise<number> {
  const counts = await queueFor(s.deps.queues, 'inbound').getJobCounts(
    'waiting',
    'active',
    'completed',
    'failed',
    'delayed',
    'prioritized',
  );
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

/** Waits until the queues have nothing waiting, active or delayed (so "nothing more happened" can be asserted). */
export async function queuesIdle(s: TestStack, timeoutMs = 10_000, names: readonly QueueName[] = QUEUE_NAMES): Promise<void> {
  await eventually(
    async () => {
      for (const q of names.flatMap((n) => catalogQueues(s.deps.queues, n))) {
        const c = await q.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
        if (Object.values(c).some((n) => n > 0)) return undefined;
      }
      return true;
    },
    timeoutMs,
    'queues to drain',
  );
}

/** The edges of an event with their platform users. */
export async function edgesOf(s: TestStack, eventId: string) {
  return s.deps.sql<
    {
      edge_type: string;
      target_node_type: string;
      target_node_id: string;
      external_id: string | null;
      is_system_user: boolean | null;
      name: string | null;
    }[]
  >`
    SELECT e.edge_type, e.target_node_type, e.target_node_id, p.external_id, p.is_system_user, p.name
      FROM event_edges e LEFT JOIN platform_users p ON p.id = e.target_node_id
     WHERE e.event_id = ${eventId} ORDER BY e.ord`;
}

type EventRow = Awaited<ReturnType<typeof eventsOf>>[number];

/** Waits for the application's first event of `type` matching `where`. */
export async function waitForEvent(
  s: TestStack,
  appId: string,
  type: string,
  where: (e: EventRow) => boolean,
  timeoutMs = 10_000,
): Promise<EventRow> {
  return eventually(async () => (await eventsOf(s, appId, type)).find(where), timeoutMs, `a matching ${type} event`);
}

/** Events of `type` about one platform message. */
export async function eventsAbout(s: TestStack, appId: string, type: string, externalMessageId: string) {
  return (await eventsOf(s, appId, type)).filter((e) => e.payload.external_message_id === externalMessageId);
}

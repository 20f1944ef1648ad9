import { randomUUID } from 'node:crypto';
import type { Deps } from '../../src/deps.js';
import { publishWakes, wakeChannels } from '../../src/ledger/wake.js';
import { writeEvents } from '../../src/ledger/write.js';
import type { LedgerEvent } from '../../src/queues.js';
import { openSse, type SseClient, type SseFrame } from '../helpers/sse.js';
import type { AppCredentials } from '../helpers/stack.js';

export type EventSpec = Partial<Omit<LedgerEvent, 'app_id'>>;

/** Commits events the way the ledger worker does (one group commit, then the wake); returns their ids in order. */
export async function commit(deps: Deps, appId: string, specs: EventSpec[], options: { wake?: boolean } = {}): Promise<string[]> {
  const events: LedgerEvent[] = specs.map((s) => ({
    id: randomUUID(),
    event_type: 'test.tick',
    payload: {},
    edges: [],
    attachments: [],
    ...s,
    app_id: appId,
  }));
  const committed = await writeEvents(deps.sql, events);
  if (options.wake !== false) await publishWakes(deps.redis, wakeChannels(deps.config), committed);
  return events.map((e) => e.id);
}

export interface StreamEvent {
  id: string;
  appId: string;
  eventType: string;
  payload: Record<string, unknown>;
  edges: { edgeType: string; targetNodeType: string; targetNodeId: string }[];
  attachments: unknown[];
  createdAt: string;
  conversationId: string | null;
  cursor: string;
}

export const parse = (f: SseFrame): StreamEvent => JSON.parse(f.data!) as StreamEvent;

/** Opens GET /events/stream with the key (and, unless `appHeader: false`, the app header). */
export function stream(
  base: string,
  auth: AppCredentials | undefined,
  query = '',
  options: { headers?: Record<string, string>; appHeader?: boolean } = {},
): Promise<SseClient> {
  const headers: Record<string, string> = { ...(auth ? { Authorization: `Bearer ${auth.apiKey}` } : {}) };
  if (auth && options.appHeader !== false) headers['X-Service-App-ID'] = auth.appId;
  return openSse(`${base}/events/stream${query}`, { headers: { ...headers, ...(options.headers ?? {}) } });
}

/** Polls `check` until it returns true or the deadline passes. */
export async function until(check: () => Promise<boolean> | boolean, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

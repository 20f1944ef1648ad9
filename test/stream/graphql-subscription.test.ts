import { randomUUID } from 'node:crypto';
import { createClient } from 'graphql-sse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSse, take, type SseClient, type SseFrame } from '../helpers/sse.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { commit, stream } from './helpers.js';

let s: TestStack;
let small: TestStack;

beforeAll(async () => {
  [s, small] = await Promise.all([
    startTestStack({ workers: false }),
    startTestStack({ workers: false, env: { STREAM_MAX_PER_APP: '1', STREAM_MAX_MS: '1500', SHUTDOWN_TIMEOUT_MS: '1000' } }),
  ]);
});
afterAll(() => Promise.all([s.close(), small.close()]));

const SUB = /* GraphQL */ `
  subscription ($types: [String!], $conv: ID, $user: ID, $after: String) {
    eventStream(eventTypes: $types, conversationId: $conv, userId: $user, after: $after) {
      id appId eventType payload createdAt cursor edges { edgeType targetNodeType targetNodeId }
    }
  }`;

function subscribe(
  stack: TestStack,
  auth: AppCredentials | undefined,
  variables: Record<string, unknown> = {},
  headers: Record<string, string> = {},
): Promise<SseClient> {
  return openSse(`${stack.base}/`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...(auth ? auth.headers : {}), ...headers },
    body: JSON.stringify({ query: SUB, variables }),
  });
}

interface Node {
  id: string;
  eventType: string;
  cursor: string;
  payload: Record<string, unknown>;
}
const node = (f: SseFrame): Node => {
  expect(f.event).toBe('next');
  const r = JSON.parse(f.data!);
  expect(r.errors).toBeUndefined();
  return r.data.eventStream as Node;
};
const cursorOf = async (auth: AppCredentials, id: string) => (await s.request('GET', `/v1/events/${id}`, { auth })).json.cursor as string;

describe('GraphQL eventStream subscription (graphql-sse, distinct connections)', () => {
  it('starts live: no history, then each new event as a `next` execution result', async () => {
    const app = await s.createApp();
    const old = await commit(s.deps, app.appId, [{ event_type: 'old' }, { event_type: 'old' }]);
    const c = await subscribe(s, app);
    expect(c.status).toBe(200);
    expect(c.headers.get('content-type')).toMatch(/^text\/event-stream/);
    // Until the subscription has joined the tail, a commit may precede it: probe until one arrives.
    let first: Node | undefined;
    while (!first) {
      await commit(s.deps, app.appId, [{ event_type: 'probe' }]);
      const f = await c.next(300).catch(() => undefined);
      if (f) first = node(f);
    }
    expect(first.eventType).toBe('probe');
    const real = await commit(s.deps, app.appId, [{ event_type: 'real.one' }, { event_type: 'real.two' }]);
    const seen: Node[] = [];
    while (seen.at(-1)?.id !== real[1]) seen.push(node((await take(c, 1))[0]));
    const nonProbe = seen.filter((n) => n.eventType !== 'probe');
    expect(nonProbe.map((n) => n.id)).toEqual(real);
    expect(seen.some((n) => old.includes(n.id))).toBe(false);
    c.close();
  });

  it('with `after` sends every matching event strictly after the cursor in order, then live, honouring the filters', async () => {
    const app = await s.createApp();
    const conv = randomUUID();
    const [pu] = await s.deps.sql<
      { id: string }[]
    >`INSERT INTO platform_users (app_id, platform, external_id) VALUES (${app.appId}, 'TELEGRAM', '9') RETURNING id`;
    const edges = [{ edge_type: 'sent_by', target_node_type: 'platform_user' as const, target_node_id: pu.id }];
    const [start] = await commit(s.deps, app.appId, [{ event_type: 'start' }]);
    const mk = (n: number) => [
      { event_type: 'order.placed', conversation_id: conv, edges, payload: { n } },
      { event_type: 'order.placed', conversation_id: null, edges, payload: { n } },
      { event_type: 'ping', conversation_id: conv, edges, payload: { n } },
      { event_type: 'order.paid', conversation_id: conv, edges: [], payload: { n } },
      { event_type: 'order.paid', conversation_id: conv, edges, payload: { n } },
    ];
    const before = await commit(s.deps, app.appId, mk(1));
    const c = await subscribe(s, app, { types: ['order.*'], conv, user: pu.id, after: await cursorOf(app, start) });
    const got = await take(c, 2);
    expect(got.map((f) => node(f).id)).toEqual([before[0], before[4]]);
    const live = await commit(s.deps, app.appId, mk(2));
    const more = await take(c, 2);
    expect(more.map((f) => node(f).id)).toEqual([live[0], live[4]]);
    const n = node(more[1]);
    expect(n.cursor).toBe(await cursorOf(app, live[4]));

    // Resuming from any delivered cursor continues exactly after it.
    c.close();
    const again = await subscribe(s, app, { types: ['order.*'], conv, user: pu.id, after: node(got[1]).cursor });
    expect((await take(again, 2)).map((f) => node(f).id)).toEqual([live[0], live[4]]);
    again.close();
  });

  it('works with the graphql-sse client library', async () => {
    const app = await s.createApp();
    const [start] = await commit(s.deps, app.appId, [{ event_type: 'start' }]);
    const ids = await commit(s.deps, app.appId, [{ event_type: 'a' }, { event_type: 'b' }]);
    const client = createClient({ url: `${s.base}/`, singleConnection: false, headers: app.headers, retryAttempts: 0 });
    const got: string[] = [];
    const after = await cursorOf(app, start);
    await new Promise<void>((resolve, reject) => {
      const stop = client.subscribe<{ eventStream: Node }>(
        { query: SUB, variables: { after } },
        {
          next: (r) => {
            got.push(r.data!.eventStream.id);
            if (got.length === ids.length) {
              stop();
              resolve();
            }
          },
          error: reject,
          complete: () => undefined,
        },
      );
    });
    expect(got).toEqual(ids);
    client.dispose();
  });

  it('enforces the key and `events:read` as plain 401/403 responses before any stream', async () => {
    const app = await s.createApp();
    const none = await subscribe(s, undefined);
    expect(none.status).toBe(401);
    expect(none.headers.get('content-type')).toMatch(/application\/json/);
    const writer = await s.createKey(app.appId, ['events:write', 'users:read']);
    const forbidden = await subscribe(s, writer);
    expect(forbidden.status).toBe(403);
    expect(JSON.parse(forbidden.text!).error.code).toBe('FORBIDDEN');
  });

  it('answers a malformed `after` or filter with a GraphQL error carrying the code', async () => {
    const app = await s.createApp();
    for (const [vars, code] of [
      [{ after: 'nope' }, 'INVALID_CURSOR'],
      [{ types: ['Bad Type'] }, 'VALIDATION_ERROR'],
      [{ conv: 'x' }, 'VALIDATION_ERROR'],
    ] as const) {
      const c = await subscribe(s, app, vars);
      const f = await c.next();
      expect(f?.event).toBe('next');
      expect(JSON.parse(f!.data!).errors[0].extensions.code).toBe(code);
      c.close();
    }
  });

  it('counts against the per-application stream cap shared with GET /events/stream (429), and completes after STREAM_MAX_MS', async () => {
    const app = await small.createApp();
    const sse = await stream(small.base, app);
    expect(sse.status).toBe(200);
    const refused = await subscribe(small, app);
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.text!).error.code).toBe('TOO_MANY_STREAMS');
    sse.close();

    let sub = await subscribe(small, app);
    const deadline = Date.now() + 5000;
    while (sub.status !== 200 && Date.now() < deadline) sub = await subscribe(small, app);
    expect(sub.status).toBe(200);
    const t0 = Date.now();
    const f = await sub.next(5000);
    expect(f?.event).toBe('complete');
    expect(Date.now() - t0).toBeGreaterThan(1000);
    expect(await sub.ended).toBe('end');
  });
});

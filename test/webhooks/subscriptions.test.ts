import { queueFor } from '../../src/queues.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { eventually, startReceiver, type Receiver } from './receiver.js';

let s: TestStack;
let a: AppCredentials;
let rx: Receiver;

beforeAll(async () => {
  // Web only: the test endpoint sends synchronously from the web process.
  s = await startTestStack({ workers: ['webhook', 'maintenance'], env: { WEBHOOK_LOG_RETENTION_DAYS: '30' } });
  a = await s.createApp();
  rx = await startReceiver();
});
afterAll(async () => {
  await rx.close();
  await s.close();
});

const create = (body: Record<string, unknown>, auth = a) => s.request('POST', '/v1/webhook-subscriptions', { auth, body });

describe('REST subscriptions', () => {
  it('creates with 201, the subscription at the top level, and a generated secret shown once', async () => {
    const r = await create({ name: 'orders', target_url: rx.url, event_patterns: ['order.*'] });
    expect(r.status).toBe(201);
    expect(r.json).toMatchObject({
      name: 'orders',
      target_url: rx.url,
      event_patterns: ['order.*'],
      status: 'ACTIVE',
      max_per_second: null,
    });
    expect(r.json.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.json.created_at).toMatch(/Z$/);
    expect(r.json.secret).toMatch(/^whsec_/);
    const [row] = await s.deps.sql`SELECT secret_sealed FROM webhook_subscriptions WHERE id = ${r.json.id}`;
    expect(row.secret_sealed).not.toContain(r.json.secret.slice(6));
    expect(s.deps.secrets.open(row.secret_sealed)).toBe(r.json.secret);
    const read = await s.request('GET', `/v1/webhook-subscriptions/${r.json.id}`, { auth: a });
    expect(read.json.secret).toBeUndefined();
    expect(read.text).not.toContain(r.json.secret);
    const list = await s.request('GET', '/v1/webhook-subscriptions', { auth: a });
    expect(list.json.data.map((x: { id: string }) => x.id)).toContain(r.json.id);
    expect(list.text).not.toContain('whsec_');
  });

  it('refuses bad input with VALIDATION_ERROR details, never 500', async () => {
    const cases: [Record<string, unknown>, (string | number)[]][] = [
      [{ name: 'x', target_url: rx.url, event_patterns: ['ok'], secret: 'short' }, ['secret']],
      [{ name: 'x', target_url: rx.url, event_patterns: [] }, ['event_patterns']],
      [{ name: 'x', target_url: rx.url, event_patterns: ['Bad Pattern'] }, ['event_patterns', 0]],
      [{ name: '', target_url: rx.url, event_patterns: ['a'] }, ['name']],
      [{ name: 'x', target_url: 'not a url', event_patterns: ['a'] }, ['target_url']],
      [{ name: 'x', target_url: 'ftp://example.com/x', event_patterns: ['a'] }, ['target_url']],
      [{ name: 'x', target_url: rx.url, event_patterns: ['a'], max_per_second: 0 }, ['max_per_second']],
    ];
    for (const [body, path] of cases) {
      const r = await create(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.error.details[0].path).toEqual(path);
    }
    const bad = await s.request('PATCH', `/v1/webhook-subscriptions/not-a-uuid`, { auth: a, body: { status: 'PAUSED' } });
    expect(bad.status).toBe(404);
    const disabled = await s.request('POST', '/v1/webhook-subscriptions', {
      auth: a,
      body: { name: 'x', target_url: rx.url, event_patterns: ['a'] },
    });
    const toDisabled = await s.request('PATCH', `/v1/webhook-subscriptions/${disabled.json.id}`, { auth: a, body: { status: 'DISABLED' } });
    expect(toDisabled.status).toBe(400);
  });

  it('updates, pauses and deletes; needs the admin scope', async () => {
    const c = await create({ name: 'n', target_url: rx.url, event_patterns: ['a.b'], max_per_second: 5 });
    const u = await s.request('PATCH', `/v1/webhook-subscriptions/${c.json.id}`, {
      auth: a,
      body: { name: 'renamed', event_patterns: ['x.*', 'y'], status: 'PAUSED', max_per_second: null },
    });
    expect(u.status).toBe(200);
    expect(u.json).toMatchObject({ name: 'renamed', event_patterns: ['x.*', 'y'], status: 'PAUSED', max_per_second: null });
    const reader = await s.createKey(a.appId, ['events:read', 'events:write']);
    expect((await s.request('GET', '/v1/webhook-subscriptions', { auth: reader })).status).toBe(403);
    expect((await create({ name: 'n', target_url: rx.url, event_patterns: ['a'] }, reader)).status).toBe(403);
    expect((await s.request('DELETE', `/v1/webhook-subscriptions/${c.json.id}`, { auth: a })).status).toBe(204);
    expect((await s.request('GET', `/v1/webhook-subscriptions/${c.json.id}`, { auth: a })).status).toBe(404);
    expect((await s.request('DELETE', `/v1/webhook-subscriptions/${c.json.id}`, { auth: a })).status).toBe(404);
  });
});

describe('GraphQL subscriptions', () => {
  it('runs the GraphQL webhook operations', async () => {
    const c = await s.gql(
      a,
      `mutation($u: String!) { createWebhookSubscription(name: "g", targetUrl: $u, eventPatterns: ["message.*"]) { id name targetUrl eventPatterns status secret createdAt } }`,
      { u: rx.url },
    );
    const sub = c.json.data.createWebhookSubscription;
    expect(sub).toMatchObject({ name: 'g', targetUrl: rx.url, eventPatterns: ['message.*'], status: 'ACTIVE' });
    expect(sub.secret).toMatch(/^whsec_/);
    const q = await s.gql(a, `{ webhookSubscriptions { id name targetUrl eventPatterns status createdAt secret } }`);
    const listed = q.json.data.webhookSubscriptions.find((x: { id: string }) => x.id === sub.id);
    expect(listed).toMatchObject({ name: 'g', secret: null });
    const u = await s.gql(
      a,
      `mutation($id: ID!) { updateWebhookSubscription(id: $id, name: "g2", status: PAUSED) { id name eventPatterns status } }`,
      { id: sub.id },
    );
    expect(u.json.data.updateWebhookSubscription).toEqual({ id: sub.id, name: 'g2', eventPatterns: ['message.*'], status: 'PAUSED' });
    const t = await s.gql(a, `mutation($id: ID!) { testWebhookSubscription(id: $id) { success statusCode responseBody duration } }`, {
      id: sub.id,
    });
    expect(t.json.data.testWebhookSubscription).toMatchObject({ success: true, statusCode: 200, responseBody: 'ok' });
    const rot = await s.gql(a, `mutation($id: ID!) { rotateWebhookSecret(id: $id) { secret previousSecretExpiresAt } }`, { id: sub.id });
    expect(rot.json.data.rotateWebhookSecret.secret).toMatch(/^whsec_/);
    const bad = await s.gql(a, `mutation { createWebhookSubscription(name: "g", targetUrl: "nope", eventPatterns: ["a"]) { id } }`);
    expect(bad.json.errors[0].extensions.code).toBe('VALIDATION_ERROR');
    const d = await s.gql(a, `mutation($id: ID!) { deleteWebhookSubscription(id: $id) }`, { id: sub.id });
    expect(d.json.data.deleteWebhookSubscription).toBe(true);
    const gone = await s.gql(a, `mutation($id: ID!) { deleteWebhookSubscription(id: $id) }`, { id: sub.id });
    expect(gone.json.errors[0].extensions.code).toBe('NOT_FOUND');
  });
});

describe('broker destinations through both faces', () => {
  const BROKER = 'amqp://gwuser:s3cr3t-pass@127.0.0.1:5672/%2F';
  const SHOWN = 'amqp://127.0.0.1:5672/%2F';
  const sealedUrl = async (id: string) =>
    s.deps.secrets.open(
      (await s.deps.sql`SELECT destination_secret_sealed FROM webhook_subscriptions WHERE id = ${id}`)[0].destination_secret_sealed,
    );
  const DEST = 'destination { kind url exchange routingKey }';

  it('creates, reads and changes a broker destination in GraphQL, never showing its credentials', async () => {
    const c = await s.gql(
      a,
      `mutation($d: JSON) { createWebhookSubscription(name: "b", destination: $d, eventPatterns: ["order.*"]) { id targetUrl ${DEST} } }`,
      { d: { kind: 'rabbitmq', url: BROKER, exchange: 'gwtest.x' } },
    );
    const sub = c.json.data.createWebhookSubscription;
    expect(sub).toMatchObject({
      targetUrl: SHOWN,
      destination: { kind: 'rabbitmq', url: SHOWN, exchange: 'gwtest.x', routingKey: '{event_type}' },
    });
    const read = await s.gql(a, `query($id: ID!) { webhookSubscription(id: $id) { ${DEST} } webhookSubscriptions { id ${DEST} } }`, {
      id: sub.id,
    });
    expect(read.json.data.webhookSubscription.destination).toEqual(sub.destination);
    expect(read.json.data.webhookSubscriptions.find((x: { id: string }) => x.id === sub.id).destination).toEqual(sub.destination);
    expect(JSON.stringify([c.json, read.json])).not.toMatch(/gwuser|s3cr3t/);

    // The update takes a destination; without url it keeps the stored one, credentials included.
    const kept = await s.gql(a, `mutation($id: ID!, $d: JSON) { updateWebhookSubscription(id: $id, destination: $d) { ${DEST} } }`, {
      id: sub.id,
      d: { kind: 'rabbitmq', exchange: 'gwtest.y', routing_key: 'gw.{app_id}' },
    });
    expect(kept.json.data.updateWebhookSubscription.destination).toEqual({
      kind: 'rabbitmq',
      url: SHOWN,
      exchange: 'gwtest.y',
      routingKey: 'gw.{app_id}',
    });
    expect(await sealedUrl(sub.id)).toBe('amqp://gwuser:s3cr3t-pass@127.0.0.1:5672/%2F');
    const moved = await s.gql(
      a,
      `mutation($id: ID!, $d: JSON) { updateWebhookSubscription(id: $id, destination: $d) { targetUrl ${DEST} } }`,
      {
        id: sub.id,
        d: { kind: 'rabbitmq', url: 'amqp://other:pw@127.0.0.1:5673', exchange: 'gwtest.y' },
      },
    );
    expect(moved.json.data.updateWebhookSubscription.targetUrl).toBe('amqp://127.0.0.1:5673');
    expect(await sealedUrl(sub.id)).toBe('amqp://other:pw@127.0.0.1:5673');

    // The same refusals as REST: a target URL on a broker, a bad setting, a kind change without url.
    const refusals: [Record<string, unknown>, (string | number)[]][] = [
      [{ t: 'http://127.0.0.1:1/' }, ['target_url']],
      [{ d: { kind: 'rabbitmq', exchange: 'bad name' } }, ['destination', 'exchange']],
      [{ d: { kind: 'rabbitmq', exchange: 'x', extra: 1 } }, ['destination', 'extra']],
    ];
    for (const [vars, path] of refusals) {
      const r = await s.gql(
        a,
        `mutation($id: ID!, $t: String, $d: JSON) { updateWebhookSubscription(id: $id, targetUrl: $t, destination: $d) { id } }`,
        {
          id: sub.id,
          ...vars,
        },
      );
      expect(r.json.errors?.[0]?.extensions, JSON.stringify(vars)).toMatchObject({ code: 'VALIDATION_ERROR', path });
    }
    const hook = await create({ name: 'w', target_url: rx.url, event_patterns: ['*'] });
    const noUrl = await s.gql(a, `mutation($id: ID!, $d: JSON) { updateWebhookSubscription(id: $id, destination: $d) { id } }`, {
      id: hook.json.id,
      d: { kind: 'rabbitmq', exchange: 'x' },
    });
    expect(noUrl.json.errors[0].extensions).toMatchObject({ code: 'VALIDATION_ERROR' });

    // Back to a webhook: the sealed broker URL goes with the old destination.
    const back = await s.gql(
      a,
      `mutation($id: ID!, $u: String) { updateWebhookSubscription(id: $id, destination: {kind: "webhook"}, targetUrl: $u) { targetUrl ${DEST} } }`,
      { id: sub.id, u: rx.url },
    );
    expect(back.json.data.updateWebhookSubscription).toEqual({
      targetUrl: rx.url,
      destination: { kind: 'webhook', url: null, exchange: null, routingKey: null },
    });
    const [row] = await s.deps.sql`SELECT destination_secret_sealed FROM webhook_subscriptions WHERE id = ${sub.id}`;
    expect(row.destination_secret_sealed).toBeNull();
  });

  it('keeps a broker URL through a REST PATCH without url, and needs one to change the kind', async () => {
    const c = await create({ name: 'r', event_patterns: ['*'], destination: { kind: 'rabbitmq', url: BROKER, exchange: 'gwtest.x' } });
    expect(c.status).toBe(201);
    const kept = await s.request('PATCH', `/v1/webhook-subscriptions/${c.json.id}`, {
      auth: a,
      body: { destination: { kind: 'rabbitmq', exchange: 'gwtest.z' } },
    });
    expect(kept.status).toBe(200);
    expect(kept.json.destination).toEqual({ kind: 'rabbitmq', url: SHOWN, exchange: 'gwtest.z', routing_key: '{event_type}' });
    expect(await sealedUrl(c.json.id)).toBe('amqp://gwuser:s3cr3t-pass@127.0.0.1:5672/%2F');
    const hook = await create({ name: 'w', target_url: rx.url, event_patterns: ['*'] });
    const noUrl = await s.request('PATCH', `/v1/webhook-subscriptions/${hook.json.id}`, {
      auth: a,
      body: { destination: { kind: 'rabbitmq', exchange: 'gwtest.z' } },
    });
    expect([noUrl.status, noUrl.json.error.code, noUrl.json.error.details[0].path]).toEqual([
      400,
      'VALIDATION_ERROR',
      ['destination', 'url'],
    ]);
    // Create still needs the URL.
    const created = await create({ name: 'n', event_patterns: ['*'], destination: { kind: 'rabbitmq', exchange: 'gwtest.z' } });
    expect([created.status, created.json.error.code]).toEqual([400, 'VALIDATION_ERROR']);
  });
});

describe('test endpoint and delivery logs', () => {
  it('sends a signed webhook.test synchronously, reports the answer, and logs it with cursor pagination', async () => {
    const c = await create({ name: 't', target_url: rx.url, event_patterns: ['*'] });
    rx.answer({ status: 201, body: 'created-1' }, { status: 500, body: 'boom' }, { status: 200, body: 'third' });
    const t1 = await s.request('POST', `/v1/webhook-subscriptions/${c.json.id}/test`, { auth: a });
    expect(t1.status).toBe(200);
    expect(t1.json).toMatchObject({ success: true, status_code: 201, response_body: 'created-1' });
    expect(typeof t1.json.duration).toBe('number');
    const sent = rx.received.at(-1)!;
    expect(sent.json).toMatchObject({ subscription_id: c.json.id, event_type: 'webhook.test', app_id: a.appId });
    expect(sent.headers['x-service-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    const t2 = await s.request('POST', `/v1/webhook-subscriptions/${c.json.id}/test`, { auth: a });
    expect(t2.json).toMatchObject({ success: false, status_code: 500, response_body: 'boom' });
    await s.request('POST', `/v1/webhook-subscriptions/${c.json.id}/test`, { auth: a });

    const p1 = await s.request('GET', `/v1/webhook-subscriptions/${c.json.id}/deliveries?limit=2`, { auth: a });
    expect(p1.json.data.map((l: { response_body: string }) => l.response_body)).toEqual(['third', 'boom']);
    expect(p1.json.data[1]).toMatchObject({ event_type: 'webhook.test', status: 'failed', status_code: 500, attempt_count: 1 });
    expect(p1.json.data[1].request_body).toBe(rx.received.at(-2)!.body);
    expect(p1.json.has_more).toBe(true);
    const p2 = await s.request('GET', `/v1/webhook-subscriptions/${c.json.id}/deliveries?limit=2&after=${p1.json.next_cursor}`, {
      auth: a,
    });
    expect(p2.json.data.map((l: { response_body: string }) => l.response_body)).toEqual(['created-1']);
    expect(p2.json.has_more).toBe(false);

    const g1 = await s.gql(
      a,
      `query($id: ID!) { webhookDeliveryLogs(webhookSubscriptionId: $id, first: 2) { edges { cursor node { eventType status statusCode attemptCount duration responseBody requestBody createdAt } } pageInfo { hasNextPage endCursor } } }`,
      { id: c.json.id },
    );
    const conn = g1.json.data.webhookDeliveryLogs;
    expect(conn.edges.map((e: { node: { responseBody: string } }) => e.node.responseBody)).toEqual(['third', 'boom']);
    expect(conn.pageInfo.hasNextPage).toBe(true);
    const g2 = await s.gql(
      a,
      `query($id: ID!, $after: String) { webhookDeliveryLogs(webhookSubscriptionId: $id, first: 2, after: $after) { edges { node { responseBody } } pageInfo { hasNextPage } } }`,
      { id: c.json.id, after: conn.pageInfo.endCursor },
    );
    expect(g2.json.data.webhookDeliveryLogs.edges.map((e: { node: { responseBody: string } }) => e.node.responseBody)).toEqual([
      'created-1',
    ]);
    const badCursor = await s.request('GET', `/v1/webhook-subscriptions/${c.json.id}/deliveries?after=zzz`, { auth: a });
    expect(badCursor.status).toBe(400);
    expect(badCursor.json.error.code).toBe('INVALID_CURSOR');
    // Test sends never count toward disabling the endpoint.
    const [row] = await s.deps.sql`SELECT consecutive_failures FROM webhook_subscriptions WHERE id = ${c.json.id}`;
    expect(row.consecutive_failures).toBe(0);
  });

  it('truncates logged response bodies to 64 KB', async () => {
    const c = await create({ name: 'big', target_url: rx.url, event_patterns: ['*'] });
    rx.answer({ status: 200, body: 'x'.repeat(100_000) });
    const t = await s.request('POST', `/v1/webhook-subscriptions/${c.json.id}/test`, { auth: a });
    expect(t.json.response_body).toHaveLength(65_536);
    const logs = await s.request('GET', `/v1/webhook-subscriptions/${c.json.id}/deliveries`, { auth: a });
    expect(logs.json.data[0].response_body).toHaveLength(65_536);
    rx.answer({ status: 200, body: 'ok' });
  });

  it('removes logs older than the retention through the maintenance task, and through a job an older release queued', async () => {
    const c = await create({ name: 'old', target_url: rx.url, event_patterns: ['*'] });
    for (let i = 0; i < 3; i++) await s.request('POST', `/v1/webhook-subscriptions/${c.json.id}/test`, { auth: a });
    const ns = (
      await s.deps.sql<{ n: string }[]>`SELECT n::text AS n FROM webhook_delivery_logs WHERE subscription_id = ${c.json.id} ORDER BY n`
    ).map((r) => r.n);
    expect(ns).toHaveLength(3);
    const age = (n: string) => s.deps.sql`UPDATE webhook_delivery_logs SET created_at = now() - interval '31 days' WHERE n = ${n}`;
    const gone = (n: string) => eventually(async () => (await s.deps.sql`SELECT 1 FROM webhook_delivery_logs WHERE n = ${n}`).length === 0);

    const schedulers = await queueFor(s.deps.queues, 'maintenance').getJobSchedulers();
    expect(schedulers.find((j) => j.key === 'maintenance-prune-webhook-logs')?.template?.data).toEqual({ task: 'prune-webhook-logs' });
    expect((await queueFor(s.deps.queues, 'webhook').getJobSchedulers()).map((j) => j.key)).not.toContain('webhook-log-retention');
    // Run the scheduled task now instead of waiting an hour.
    await age(ns[0]);
    await queueFor(s.deps.queues, 'maintenance').add('prune-webhook-logs', { task: 'prune-webhook-logs' });
    await gone(ns[0]);
    await age(ns[1]);
    await queueFor(s.deps.queues, 'webhook').add('log-retention', { kind: 'log-retention' });
    await gone(ns[1]);
    const [{ n }] = await s.deps.sql`SELECT count(*)::int AS n FROM webhook_delivery_logs WHERE subscription_id = ${c.json.id}`;
    expect(n).toBe(1);
  });
});

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../src/http/api.js';
import { documentOptions } from '../../src/http/openapi.js';
import { offlineOpenApiDocument } from '../../src/http/offline-document.js';
import { projectRoot } from '../../src/project-root.js';
import { connect } from '../helpers/connections.js';
import { OpenApiContract, type OpenApiDocument } from '../helpers/openapi-contract.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';
import { TelegramFake } from '../fakes/telegram.js';

interface Operation {
  operationId: string;
  parameters?: { name: string; in: string }[];
  requestBody?: { content: Record<string, unknown> };
  responses: Record<string, { content?: Record<string, { schema?: unknown }> }>;
  security?: unknown[];
  'x-required-scope'?: string;
}
type Doc = OpenApiDocument & {
  servers: { url: string }[];
  info: { license?: { name: string; identifier?: string }; description?: string };
  paths: Record<string, Record<string, Operation>>;
};

let s: TestStack;
let app: AppCredentials;
let tg: TelegramFake;
let doc: Doc;

beforeAll(async () => {
  tg = await TelegramFake.start();
  s = await startTestStack({ workers: ['ledger', 'send'] });
  app = await s.createApp();
  doc = (await s.request('GET', '/v1/openapi.json')).json;
});
afterAll(async () => {
  await s?.close();
  await tg?.close();
});

const operations = () =>
  Object.entries(doc.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => ({ path, method, op })));

// Generated clients name their methods after these: renaming one breaks every client, so the
// list is spelled out here and changes only on purpose.
const OPERATION_IDS = [
  'activateLinkCode',
  'createApiKey',
  'createEvent',
  'createEventSchema',
  'createLinkCode',
  'createPlatformConnection',
  'createPortalSession',
  'createWebhook',
  'deleteEventSchema',
  'deletePlatformConnection',
  'deleteWebhook',
  'downloadFile',
  'endPortalSession',
  'exchangePortalToken',
  'getConversation',
  'getEvent',
  'getEventSchema',
  'getFile',
  'getMessage',
  'getPlatformConnection',
  'getPortalSession',
  'getUser',
  'getWebhook',
  'getWebhookDelivery',
  'listApiKeys',
  'listConversations',
  'listEventDeliveries',
  'listEventSchemas',
  'listEvents',
  'listPlatformConnections',
  'listPlatforms',
  'listPortalSessions',
  'listUserEvents',
  'listUsers',
  'listWebhookDeliveries',
  'listWebhooks',
  'mergeUsers',
  'replayWebhook',
  'retryWebhookDelivery',
  'revokeApiKey',
  'revokePortalSession',
  'revokePortalSessions',
  'rotateWebhookSecret',
  'sendMessage',
  'simulateSandboxMessage',
  'streamEvents',
  'testWebhook',
  'updateEventSchema',
  'updatePlatformConnection',
  'updateUser',
  'updateWebhook',
  'uploadFile',
];

describe('the OpenAPI document', () => {
  it('names every operation with its stable camelCase operationId', () => {
    expect(
      operations()
        .map((o) => o.op.operationId)
        .sort(),
    ).toEqual(OPERATION_IDS);
  });

  it('has a licence, a description and relative servers when PUBLIC_BASE_URL is not set', () => {
    expect(doc.info.license).toEqual({ name: expect.any(String), identifier: expect.any(String) });
    expect(doc.info.description).toMatch(/GraphQL/);
    expect(doc.servers).toEqual([{ url: '/', description: expect.any(String) }]);
  });

  it('names the configured PUBLIC_BASE_URL as its server', () => {
    const api = new Api(undefined as never, undefined as never);
    const options = documentOptions({ PUBLIC_BASE_URL: 'https://gateway.example.org', publicBaseUrlConfigured: true });
    expect((api.openapi(options) as Doc).servers).toEqual([{ url: 'https://gateway.example.org', description: expect.any(String) }]);
  });

  it('declares Idempotency-Key on exactly the operations that honour it', () => {
    const withKey = operations()
      .filter((o) => o.op.parameters?.some((p) => p.in === 'header' && p.name === 'Idempotency-Key'))
      .map((o) => o.op.operationId)
      .sort();
    expect(withKey).toEqual(['createEvent', 'sendMessage']);
  });

  it('declares every answer the service gives: auth, limits, outages, body errors and unknown ids', () => {
    for (const { path, method, op } of operations()) {
      const statuses = Object.keys(op.responses);
      const name = `${method.toUpperCase()} ${path}`;
      // Any query string is checked for unstorable text, so every operation can answer 400.
      expect(statuses, name).toEqual(expect.arrayContaining(['400', '500']));
      // API-key operations pass the limiter and the ledger's health gate; a cookie-only one still needs its session.
      const byKey = op.security?.some((s) => typeof s === 'object' && s !== null && 'apiKey' in s);
      if (byKey) expect(statuses, name).toEqual(expect.arrayContaining(['401', '403', '429', '503']));
      else if (op.security?.length) expect(statuses, name).toContain('401');
      // The JSON parser reads a body on any route; GET routes are not sent one.
      if (method !== 'get') expect(statuses, name).toEqual(expect.arrayContaining(['400', '413', '415']));
      if (path.includes('{')) expect(statuses, name).toContain('404');
      for (const [status, r] of Object.entries(op.responses))
        if (Number(status) >= 400)
          expect(r.content?.['application/json']?.schema, `${name} ${status}`).toEqual({
            allOf: [
              { $ref: '#/components/schemas/Error' },
              { properties: { error: { properties: { code: { enum: expect.any(Array) } } } } },
            ],
          });
    }
  });

  it('describes the stream, the upload and the download in their own media types', () => {
    const stream = doc.paths['/events/stream'].get;
    expect(Object.keys(stream.responses['200'].content ?? {})).toEqual(['text/event-stream']);
    expect(stream.parameters).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'Last-Event-ID', in: 'header' })]));
    expect(Object.keys(doc.paths['/v1/files'].post.requestBody?.content ?? {})).toEqual(['multipart/form-data']);
    expect(Object.keys(doc.paths['/v1/files/{id}/content'].get.responses['200'].content ?? {})).toEqual(['application/octet-stream']);
  });

  it('is the document the lint script writes (built from the routes without a server)', async () => {
    const { execFileSync } = await import('node:child_process');
    const written = execFileSync(process.execPath, ['--import', 'tsx', 'scripts/openapi-document.ts'], {
      env: { PATH: process.env.PATH ?? '' },
      encoding: 'utf8',
    });
    expect(JSON.parse(written)).toEqual(doc);
  });
});

describe('route declarations', () => {
  const route = (api: Api, operationId: string, path = `/v1/x-${operationId}`) =>
    api.route({ method: 'get', path, operationId, summary: 'x', responses: {}, handler: async () => ({ status: 204 }) });

  it('refuses a route without a camelCase operationId', () => {
    const api = new Api(undefined as never, undefined as never);
    expect(() => route(api, '')).toThrow(/operationId must be camelCase/);
    expect(() => route(api, 'list-things')).toThrow(/operationId must be camelCase/);
    expect(() => route(api, 'ListThings')).toThrow(/operationId must be camelCase/);
  });

  it('refuses an operationId another route already has', () => {
    const api = new Api(undefined as never, undefined as never);
    route(api, 'listThings', '/v1/things');
    expect(() => route(api, 'listThings', '/v1/other-things')).toThrow(/listThings is already GET \/v1\/things's/);
  });
});

describe('the reference /docs renders', () => {
  it('describes every tag and every operation in words of its own', () => {
    const doc = offlineOpenApiDocument() as unknown as {
      tags: { name: string; description: string }[];
      paths: Record<string, Record<string, { operationId: string; summary: string; description?: string }>>;
    };
    for (const tag of doc.tags) expect(tag.description, tag.name).not.toBe(tag.name);
    const operations = Object.values(doc.paths).flatMap((methods) => Object.values(methods));
    expect(operations.length).toBeGreaterThan(40);
    for (const op of operations) {
      expect(op.description, op.operationId).toBeDefined();
      expect(op.description, op.operationId).not.toBe(op.summary);
      expect(op.description!.length, op.operationId).toBeGreaterThan(40);
    }
  });

  it('refuses a route under a resource whose tag has no description', () => {
    const api = new Api(undefined as never, undefined as never);
    api.route({
      method: 'get',
      path: '/v1/undescribed',
      operationId: 'listUndescribed',
      summary: 'x',
      responses: {},
      handler: async () => ({ status: 204 }),
    });
    expect(() => api.openapi(documentOptions({ PUBLIC_BASE_URL: 'http://x', publicBaseUrlConfigured: false }))).toThrow(
      /tag "undescribed" has no description/,
    );
  });
});

describe('the contract checker the REST tests go through', () => {
  it('is what every test reaching a REST route with a hand-made request uses (apiFetch, not fetch)', () => {
    const root = join(projectRoot(), 'test');
    const raw = readdirSync(root, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts') && !f.endsWith('openapi-contract.ts'))
      .flatMap((f) =>
        readFileSync(join(root, f), 'utf8')
          .split('\n')
          .map((line, i) => ({ at: `test/${f}:${i + 1}`, line })),
      )
      .filter(({ line }) => /(?<![\w.])fetch\(.*(\/v1\/|\/events\/stream)/.test(line))
      // A portal page's own fetch runs in the browser, as the SPA's does; the checker cannot wrap it.
      .filter(({ line }) => !/evaluate\(/.test(line));
    expect(raw.map((r) => r.at)).toEqual([]);
  });

  const contract = () => new OpenApiContract(structuredClone(doc));
  const answer = (status: number, body: unknown, contentType = 'application/json; charset=utf-8') => ({
    status,
    contentType,
    body: async () => JSON.stringify(body),
  });

  it('fails on a body its schema refuses: an undeclared field, a missing one, a wrong type', () => {
    const event = { id: 'e', app_id: 'a', event_type: 't', channels: [], payload: {}, edges: [], attachments: [], origin_event_id: null };
    const full = { ...event, conversation_id: null, platform_connection_id: null, created_at: 'now', cursor: 'c' };
    expect(() => contract().validateBody('GET', '/v1/events/e', 200, full)).not.toThrow();
    expect(() => contract().validateBody('GET', '/v1/events/e', 200, { ...full, extra: 1 })).toThrow(/additional properties.*extra/s);
    expect(() => contract().validateBody('GET', '/v1/events/e', 200, event)).toThrow(/required property 'cursor'/);
    expect(() => contract().validateBody('GET', '/v1/events/e', 200, { ...full, edges: {} })).toThrow(/\/edges must be array/);
  });

  it('fails on a status the operation does not declare, and on an undeclared media type', async () => {
    await expect(contract().check('GET', '/v1/events/e', answer(418, {}))).rejects.toThrow(
      /answered 418, which the document does not declare/,
    );
    await expect(contract().check('DELETE', '/v1/webhook-subscriptions/x', answer(200, {}))).rejects.toThrow(/does not declare/);
    await expect(contract().check('GET', '/v1/events', answer(200, 'x', 'text/html'))).rejects.toThrow(/as text\/html/);
  });

  it('fails on an error body that is not the error shape, or whose code the operation does not answer with', async () => {
    await expect(contract().check('GET', '/v1/events/e', answer(404, { message: 'nope' }))).rejects.toThrow(/refuses/);
    await expect(
      contract().check('GET', '/v1/events/e', answer(404, { error: { code: 'LINK_CODE_NOT_FOUND', message: 'nope' } })),
    ).rejects.toThrow(/\/error\/code must be equal to one of the allowed values/);
    await expect(contract().check('GET', '/v1/events/e', answer(404, { error: { code: 'NOT_FOUND', message: 'nope' } }))).resolves.toBe(
      undefined,
    );
  });

  it('leaves requests outside the document alone (GraphQL, probes, unknown routes)', async () => {
    for (const [method, path] of [
      ['POST', '/graphql'],
      ['GET', '/healthz'],
      ['PUT', '/v1/events'],
      ['GET', '/v1/no-such-thing'],
    ])
      await expect(contract().check(method, path, answer(418, 'x', 'text/plain'))).resolves.toBe(undefined);
  });
});

describe('GET /v1/messages/:id', () => {
  it('answers fields its schema declares, for a sent and a failed message', async () => {
    const conn = await connect(s, app, 'TELEGRAM', { bot_token: '777002:openapi-token', api_base_url: tg.url });
    const sent = await s.request('POST', '/v1/messages', {
      auth: app,
      body: { platform_connection_id: conn.id, to_external_id: '4242', message: 'hi' },
    });
    expect(sent.status, sent.text).toBe(201);
    tg.blockedChats.add('4343');
    const failed = await s.request('POST', '/v1/messages', {
      auth: app,
      body: { platform_connection_id: conn.id, to_external_id: '4343', message: 'hi' },
    });
    expect(failed.status, failed.text).toBe(422);

    const contract = new OpenApiContract(doc);
    const got = await s.request('GET', `/v1/messages/${sent.json.id}`, { auth: app });
    expect(got.json).toMatchObject({ status: 'sent', platform_connection_id: conn.id, to_external_id: '4242' });
    contract.validateBody('GET', `/v1/messages/${sent.json.id}`, 200, got.json);
    const gotFailed = await s.request('GET', `/v1/messages/${failed.json.error.details[0].message_id}`, { auth: app });
    expect(gotFailed.json).toMatchObject({
      status: 'failed',
      to_external_id: '4343',
      error: { code: 'RECIPIENT_BLOCKED', platform_code: 403 },
    });
    contract.validateBody('GET', `/v1/messages/${gotFailed.json.id}`, 200, gotFailed.json);
  });
});

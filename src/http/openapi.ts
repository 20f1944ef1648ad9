import { z } from 'zod';
import type { Config } from '../config.js';
import { ERROR_STATUS, type ErrorCode } from '../errors.js';
import type { RouteSpec } from './api.js';

/** A request header an operation reads, as its OpenAPI parameter says it. */
export interface HeaderParam {
  name: string;
  description: string;
  schema: Record<string, unknown>;
}

/** `Idempotency-Key` (src/idempotency.ts): the routes that claim one declare it. */
export const IDEMPOTENCY_KEY: HeaderParam = {
  name: 'Idempotency-Key',
  description:
    'Makes a retry safe for 24 hours: a repeat with the same key and body answers with the same resource; the same key with another body answers 409 IDEMPOTENCY_CONFLICT.',
  schema: { type: 'string', minLength: 1, maxLength: 255 },
};

/** The SSE resume header (docs/guide.md, streams); `?lastEventId=` says the same for clients that cannot set headers. */
export const LAST_EVENT_ID: HeaderParam = {
  name: 'Last-Event-ID',
  description: 'Resume after this cursor: every matching event after it is sent first, in cursor order, then live ones.',
  schema: { type: 'string' },
};

/** operationIds are what generated clients name their methods: camelCase, stable, unique. */
export const OPERATION_ID = /^[a-z][a-zA-Z0-9]*$/;

// The project publishes no licence of its own; one place to change when it does.
const LICENSE = { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' };

const DESCRIPTION = [
  'REST face of the messaging gateway: platform connections, sending messages, the event ledger,',
  'webhook subscriptions, users and conversations, and the Server-Sent Events stream of the ledger.',
  '',
  'Every operation but the document itself takes an API key (`Authorization: Bearer <key>`) and,',
  'unless said otherwise, `X-Service-App-ID`. Errors answer `{ "error": { "code", "message", "details"? } }`.',
  '',
  'Not described here: GraphQL (`POST /graphql`, its SDL at `/graphql/schema.graphql`), the inbound',
  'platform webhooks (`/webhooks/…`, called by the platforms, docs/inbound.md), and the operator',
  'endpoints (`/healthz`, `/readyz`, `/metrics`, `/admin/queues`).',
].join('\n');

export interface DocumentOptions {
  info: { title: string; version: string; description: string; license: { name: string; identifier: string } };
  servers: { url: string; description: string }[];
}

/** Title, licence and servers of the served document: the configured public URL, or relative. */
export function documentOptions(config: Pick<Config, 'PUBLIC_BASE_URL' | 'publicBaseUrlConfigured'>): DocumentOptions {
  return {
    info: { title: 'Messaging gateway', version: '1', description: DESCRIPTION, license: LICENSE },
    servers: config.publicBaseUrlConfigured
      ? [{ url: config.PUBLIC_BASE_URL, description: 'This deployment (PUBLIC_BASE_URL)' }]
      : [{ url: '/', description: 'The host serving this document' }],
  };
}

/** Sent with most 429s (the rate limit's window, a stream slot) and with 503 (a backing service is down: 1 s). */
const RETRY_AFTER = { description: 'Seconds to wait before retrying, when the service knows', schema: { type: 'integer', minimum: 1 } };

/** The error body, its `code` narrowed to those the operation answers with at that status. */
const errorContent = (codes: ErrorCode[]) => ({
  'application/json': {
    schema: { allOf: [{ $ref: '#/components/schemas/Error' }, { properties: { error: { properties: { code: { enum: codes } } } } }] },
  },
});

/** Codes every operation of a kind can answer besides its own, with why. */
function impliedCodes(spec: RouteSpec<unknown, unknown, unknown>): ErrorCode[] {
  // VALIDATION_ERROR on every route: the entrance check (src/storable-text.ts) refuses unstorable
  // text in any query string, whether the route reads one or not.
  const codes: ErrorCode[] = ['INTERNAL', 'VALIDATION_ERROR'];
  if (spec.scope) codes.push('UNAUTHORIZED', 'FORBIDDEN', 'UNAVAILABLE');
  if (spec.scope && spec.rateLimited !== false) codes.push('RATE_LIMITED');
  // The JSON body parser runs before any route, so whatever can carry a body can be answered
  // bad JSON, too large, or an unsupported charset/encoding (and not JSON, where one is read).
  if (spec.body || spec.method !== 'get') codes.push('INVALID_JSON', 'PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE');
  return codes;
}

function operation(spec: RouteSpec<unknown, unknown, unknown>): Record<string, unknown> {
  const op: Record<string, unknown> = { operationId: spec.operationId, summary: spec.summary, tags: [tagOf(spec.path)] };
  if (spec.description) op.description = spec.description;
  if (spec.scope) {
    // The developer portal's session cookie is the other way in (mutations with X-CSRF-Token).
    op.security = [spec.appIdRequired === false ? { apiKey: [] } : { apiKey: [], appId: [] }, { portalSession: [] }];
    op['x-required-scope'] = spec.scope;
  } else op.security = spec.portalCookie ? [{ portalSession: [] }] : [];
  const parameters: unknown[] = [];
  for (const [where, schema] of [
    ['path', spec.params],
    ['query', spec.query],
  ] as const) {
    const js = schema ? (toJsonSchema(schema, 'input') as { properties?: Record<string, unknown>; required?: string[] }) : undefined;
    for (const [name, s] of Object.entries(js?.properties ?? {})) {
      parameters.push({ name, in: where, required: where === 'path' || (js?.required ?? []).includes(name), schema: s });
    }
  }
  for (const h of spec.headers ?? [])
    parameters.push({ name: h.name, in: 'header', required: false, description: h.description, schema: h.schema });
  if (parameters.length) op.parameters = parameters;
  if (spec.body) op.requestBody = { required: true, content: { 'application/json': { schema: toJsonSchema(spec.body, 'input') } } };
  else if (spec.requestContent) op.requestBody = { required: true, content: spec.requestContent };

  const responses: Record<string, { description: string; content?: unknown; headers?: unknown }> = {};
  for (const [status, r] of Object.entries(spec.responses)) {
    const content = r.mediaType
      ? { [r.mediaType]: { schema: r.mediaSchema ?? { type: 'string' } } }
      : r.schema
        ? { 'application/json': { schema: toJsonSchema(r.schema, 'output') } }
        : undefined;
    responses[status] = { description: r.description, ...(content ? { content } : {}) };
  }
  const codesByStatus = new Map<string, ErrorCode[]>();
  for (const code of new Set([...(spec.errors ?? []), ...impliedCodes(spec)])) {
    const status = String(ERROR_STATUS[code]);
    codesByStatus.set(status, [...(codesByStatus.get(status) ?? []), code]);
  }
  for (const [status, codes] of codesByStatus) {
    const declared = responses[status]?.description;
    responses[status] = {
      description: declared ? `${declared} (${codes.join(', ')})` : codes.join(', '),
      content: errorContent(codes),
      ...(status === '429' || status === '503' ? { headers: { 'Retry-After': RETRY_AFTER } } : {}),
    };
  }
  for (const [status, r] of Object.entries(responses))
    if (Number(status) >= 400 && !r.content) throw new Error(`${spec.operationId}: ${status} names no error code (add it to errors)`);
  op.responses = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => Number(a) - Number(b)));
  return op;
}

/** `/v1/webhook-subscriptions/{id}` → `webhook-subscriptions`: one tag per resource. */
function tagOf(path: string): string {
  const segments = path.split('/').filter(Boolean);
  return (segments[0] === 'v1' ? segments[1] : segments[0]) ?? 'root';
}

/** OpenAPI 3.1 document of the declared routes (zod 4 converts to JSON Schema natively). */
export function openApiDocument(specs: readonly RouteSpec<unknown, unknown, unknown>[], options: DocumentOptions): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const spec of specs) (paths[spec.path.replace(/:([A-Za-z_]+)/g, '{$1}')] ??= {})[spec.method] = operation(spec);
  const tags = [...new Set(specs.map((s) => tagOf(s.path)))].map((name) => ({ name, description: TAGS[name] ?? missingTag(name) }));
  return {
    openapi: '3.1.0',
    info: options.info,
    servers: options.servers,
    tags,
    paths,
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'API key' },
        appId: { type: 'apiKey', in: 'header', name: 'X-Service-App-ID', description: 'The application the key belongs to' },
        portalSession: {
          type: 'apiKey',
          in: 'cookie',
          name: 'gw_portal',
          description:
            'A developer portal session (POST /portal/session exchanges a sign-in link for it); requests other than GET/HEAD/OPTIONS also send its X-CSRF-Token header',
        },
      },
      schemas: {
        Error: {
          type: 'object',
          required: ['error'],
          additionalProperties: false,
          properties: {
            error: {
              type: 'object',
              required: ['code', 'message'],
              additionalProperties: false,
              properties: {
                code: { type: 'string', enum: Object.keys(ERROR_STATUS) },
                message: { type: 'string' },
                details: { type: 'array', items: { type: 'object' } },
              },
            },
          },
        },
      },
    },
  };
}

const TAGS: Record<string, string> = {
  events: 'The event ledger: custom events, reading in cursor order, and the Server-Sent Events stream',
  'event-schemas': 'JSON Schemas that validate custom event payloads',
  'platform-connections': 'Accounts on chat platforms the application sends and receives through',
  messages: 'Sending messages and reading their state',
  files: 'Files to attach to messages, and files received',
  'webhook-subscriptions': 'Outbound webhook subscriptions, their delivery log, replay and test',
  'webhook-deliveries': 'Single outbound webhook deliveries',
  users: 'Users and the platform users (accounts) linked to them',
  'link-codes': 'Single-use codes that link a platform account to a user',
  conversations: 'Conversations and their participants',
  portal: "Sign-in links and sessions of the developer portal, the web page for an application's developers",
  'api-keys': "The application's API keys: create one with some of the caller's scopes, list them, revoke one",
  platforms: 'The chat platforms the service can connect to, with the config each one needs',
};

/** Every tag is described: a route under a new resource must say what the resource is. */
function missingTag(name: string): never {
  throw new Error(`OpenAPI tag "${name}" has no description: add it to TAGS in src/http/openapi.ts`);
}

function toJsonSchema(schema: z.ZodType, io: 'input' | 'output'): unknown {
  try {
    // `$schema` belongs to a document's root only; the OpenAPI document's dialect is 2020-12 already.
    const { $schema: _, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' });
    return rest;
  } catch {
    return {};
  }
}

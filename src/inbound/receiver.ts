import { createHash, timingSafeEqual } from 'node:crypto';
import express, { type Request, type Response, type Router } from 'express';
import {
  connectionByVerifyToken,
  connectionsByRoutingIds,
  loadConnectionById,
  routingIdsOf,
  SHARED_WEBHOOK_PLATFORMS,
  type Connection,
} from '../connections/connections.js';
import { watchChanges } from '../change-feed.js';
import type { Deps } from '../deps.js';
import { AppError, type ErrorCode } from '../errors.js';
import { sendError } from '../http/errors.js';
import { hubQueryProblem, hubRefusal } from '../platforms/meta-inbound.js';
import { getAdapter } from '../platforms/registry.js';
import { PLATFORM_NAMES, type InboundRequest, type PlatformName } from '../platforms/types.js';
import { batchedEnqueue } from './batched-enqueue.js';
import { deliveryJob } from './delivery-job.js';
import { createFloodGuard } from './flood-guard.js';
import { lookupCache } from '../lookup-cache.js';
import { createSourceLimits, tooMany } from './source-limit.js';

/** The receiver's routes: a connection's (or a Meta platform's shared) inbound URL, and the Meta hub handshake. */
export const INBOUND_ROUTE = '/webhooks/:webhookId/:webhookSecret';
export const HANDSHAKE_ROUTE = '/webhooks/:platform';

const digest = (s: string) => createHash('sha256').update(s).digest();
const sameSecret = (a: string, b: string) => timingSafeEqual(digest(a), digest(b));

function toInbound(req: Request, deps: Deps): InboundRequest {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k.toLowerCase()] = v;
  const query: Record<string, string> = {};
  for (const [k, v] of Object.entries(req.query)) if (typeof v === 'string') query[k] = v;
  return {
    method: req.method === 'GET' ? 'GET' : 'POST',
    rawBody: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0),
    headers,
    query,
    publicUrl: deps.config.PUBLIC_BASE_URL + req.originalUrl,
    now: Date.now(),
  };
}

/** Every refusal of the inbound paths is the service's one error body (src/http/errors.ts). */
const refuse = (res: Response, code: ErrorCode, message: string, headers?: Record<string, string>) =>
  sendError(res, new AppError(code, message, undefined, headers ? { headers } : {}));
const unauthorized = (res: Response, message: string) => refuse(res, 'UNAUTHORIZED', message);

/** The usual acknowledgement, written directly: express's send (ETag, freshness) is not needed here. */
const OK_BODY = Buffer.from('{"ok":true}');
const ok = (res: Response) =>
  res.writeHead(200, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': OK_BODY.length }).end(OK_BODY);

/**
 * Inbound platform webhooks (docs/inbound.md): verify (URL secret, then the platform's own
 * signature), answer handshakes, and enqueue the raw delivery under the platform's dedupe key
 * so retries collapse into one job. Nothing else happens here: the answer must be fast.
 */
export function inboundRouter(deps: Deps): Router {
  const router = express.Router();
  const flood = createFloodGuard(deps.redis, `${deps.config.REDIS_PREFIX}:flood`, deps.config.INBOUND_FLOOD_PER_SECOND);
  const enqueueInbound = batchedEnqueue(deps.queues);
  const raw = express.raw({ type: () => true, limit: deps.config.BODY_LIMIT_BYTES });
  const ttl = deps.config.INBOUND_LOOKUP_CACHE_MS;
  const connections = lookupCache<Connection | undefined>(ttl);
  const sharedUrls = lookupCache<{ platform: PlatformName; secret: string } | undefined>(ttl);
  const routed = lookupCache<Connection[]>(ttl);
  // Any connection's change clears everything: changes are rare, and a routing cache entry
  // may hold connections under keys that do not name them.
  watchChanges(deps, 'connections', () => {
    connections.clear();
    sharedUrls.clear();
    routed.clear();
  });

  const floodGuard = async (key: string, res: Response): Promise<boolean> => {
    const verdict = await flood.consume(key);
    if (verdict.allowed) return true;
    tooMany(res, verdict, 'too many deliveries');
    return false;
  };

  const sources = createSourceLimits(deps);
  router.use('/webhooks', async (req, res, next) => {
    if (await sources.inbound(req, res)) next();
  });

  /** Enqueues one verified delivery under its dedupe key; false when the body is not a delivery of the platform. */
  const accept = async (conn: Connection, inbound: InboundRequest, body: Buffer): Promise<boolean> => {
    const job = deliveryJob(conn, inbound, body);
    if (!job) return false;
    await enqueueInbound(job);
    return true;
  };

  const notADelivery = (platform: PlatformName, res: Response) => refuse(res, 'VALIDATION_ERROR', `body is not a ${platform} delivery`);

  const ack = (platform: PlatformName, inbound: InboundRequest, res: Response) => {
    const answer = getAdapter(platform).acknowledge?.(inbound);
    if (answer) res.status(answer.status).type(answer.contentType).send(answer.body);
    else ok(res);
  };

  router.all(INBOUND_ROUTE, raw, async (req, res) => {
    if (req.method !== 'GET' && req.method !== 'POST')
      return void refuse(res, 'METHOD_NOT_ALLOWED', `${req.method} is not allowed on an inbound URL`, { Allow: 'GET, POST' });
    const { webhookId, webhookSecret } = req.params as { webhookId: string; webhookSecret: string };
    const inbound = toInbound(req, deps);

    const shared = await sharedUrls.get(webhookId, () => sharedWebhookById(deps, webhookId));
    if (shared) {
      if (!sameSecret(shared.secret, webhookSecret)) return void unauthorized(res, 'invalid webhook secret');
      return void (await receiveShared(shared.platform, req, inbound, res));
    }

    const conn = await connections.get(webhookId, () => loadConnectionById(deps, webhookId));
    if (!conn || !sameSecret(conn.webhookSecret, webhookSecret)) return void unauthorized(res, 'unknown webhook');
    if (conn.status !== 'ACTIVE') return void refuse(res, 'INBOUND_DISABLED', 'connection disabled');
    const adapter = getAdapter(conn.platform);
    if (inbound.method === 'GET') {
      const answer = adapter.handshake?.(conn.config, inbound);
      if (!answer) return void refuse(res, 'NOT_FOUND', 'no handshake for this platform');
      return void res.status(answer.status).type(answer.contentType).send(answer.body);
    }
    const verified = adapter.verify(conn.config, inbound);
    if (!verified.ok) return void unauthorized(res, verified.reason);
    const answer = adapter.handshake?.(conn.config, inbound);
    if (answer) return void res.status(answer.status).type(answer.contentType).send(answer.body);
    if (!(await floodGuard(conn.id, res))) return;
    if (!(await accept(conn, inbound, inbound.rawBody))) return void notADelivery(conn.platform, res);
    ack(conn.platform, inbound, res);
  });

  /** Meta family: route each entry to the connection whose ids it names, verified with that connection's app secret. */
  async function receiveShared(platform: PlatformName, req: Request, inbound: InboundRequest, res: Response) {
    const adapter = getAdapter(platform);
    if (inbound.method === 'GET') return void (await answerHubChallenge(platform, req, inbound, res));
    let body: { entry?: unknown[] } & Record<string, unknown>;
    try {
      body = JSON.parse(inbound.rawBody.toString('utf8'));
    } catch {
      return void refuse(res, 'INVALID_JSON', 'body is not JSON');
    }
    const ids = adapter.routingIds?.(body) ?? [];
    const candidates = await routed.get(`${platform}|${[...ids].sort().join(',')}`, () => connectionsByRoutingIds(deps, platform, ids));
    const verified = candidates.filter((c) => adapter.verify(c.config, inbound).ok);
    if (verified.length === 0) return void unauthorized(res, candidates.length ? 'invalid signature' : 'no connection for this payload');
    for (const conn of verified) {
      if (!(await floodGuard(conn.id, res))) return;
      // Each connection gets only its own entries, so one payload never leaks across applications.
      const own = new Set(routingIdsOf(platform, conn.config));
      const all = Array.isArray(body.entry) ? body.entry : [];
      const entries = all.filter((e) => (adapter.routingIds?.({ ...body, entry: [e] }) ?? []).some((id) => own.has(id)));
      if (entries.length === 0) continue;
      // The usual case, a payload for one connection only, is queued as the platform sent it.
      const ownBody = entries.length === all.length ? inbound.rawBody : Buffer.from(JSON.stringify({ ...body, entry: entries }));
      if (!(await accept(conn, inbound, ownBody))) return void notADelivery(platform, res);
    }
    ack(platform, inbound, res);
  }

  /** GET /webhooks/:platform?hub.mode=subscribe&hub.verify_token=…&hub.challenge=… */
  async function answerHubChallenge(platform: PlatformName, req: Request, inbound: InboundRequest, res: Response) {
    const problem = hubQueryProblem(inbound.query);
    if (problem) return void refuse(res, 'FORBIDDEN', problem);
    // Each attempt is a guess at some tenant's verify token: few are legitimate, so few are allowed.
    if (!(await sources.handshake(req, res))) return;
    const conn = await connectionByVerifyToken(deps, platform, inbound.query['hub.verify_token']);
    // The adapter still compares the token itself (constant time): the hash only finds the row.
    const answer = (conn && getAdapter(platform).handshake?.(conn.config, inbound)) || hubRefusal('hub.verify_token does not match');
    res.status(answer.status).type(answer.contentType).send(answer.body);
  }

  router.get(HANDSHAKE_ROUTE, async (req, res) => {
    const platform = String(req.params.platform).toUpperCase() as PlatformName;
    if (!SHARED_WEBHOOK_PLATFORMS.includes(platform)) return void refuse(res, 'NOT_FOUND', 'unknown platform');
    await answerHubChallenge(platform, req, toInbound(req, deps), res);
  });

  return router;
}

/** The shared Meta-family URL with this id, if it is one. */
async function sharedWebhookById(deps: Deps, id: string): Promise<{ platform: PlatformName; secret: string } | undefined> {
  if (!/^[0-9a-f-]{36}$/i.test(id)) return undefined;
  const [row] = await deps.sql<
    { platform: PlatformName; secret_sealed: string }[]
  >`SELECT platform, secret_sealed FROM shared_webhooks WHERE id = ${id}`;
  if (!row || !PLATFORM_NAMES.includes(row.platform)) return undefined;
  return { platform: row.platform, secret: deps.secrets.open(row.secret_sealed) };
}

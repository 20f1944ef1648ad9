import { timingSafeEqual, createHash } from 'node:crypto';
import express, { type Request, type Response, type NextFunction, type Router } from 'express';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Deps } from '../deps.js';
import { AppError } from '../errors.js';

/** Liveness, readiness and Prometheus metrics. Unauthenticated by design: no tenant data. */
export function opsRouter(deps: Deps): Router {
  const router = express.Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const checks = await Promise.allSettled([
      withTimeout(deps.sql`SELECT 1`, 2000),
      withTimeout(deps.redis.ping(), 2000),
    ]);
    const [pg, redis] = checks.map((c) => (c.status === 'fulfilled' ? 'ok' : 'down'));
    res.status(pg === 'ok' && redis === 'ok' ? 200 : 503).json({ status: pg === 'ok' && redis === 'ok' ? 'ok' : 'unavailable', postgres: pg, redis });
  });
  deps.metrics.watchQueues(deps.queues, { stuckAfterMs: deps.config.JOB_STUCK_MS });
  router.get('/metrics', async (_req, res) => {
    res.setHeader('Content-Type', deps.metrics.registry.contentType);
    res.send(await deps.metrics.registry.metrics());
  });
  return router;
}

function withTimeout<T>(p: PromiseLike<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('timeout')), ms);
    Promise.resolve(p).then((v) => { clearTimeout(t); resolve(v); }, (e) => { clearTimeout(t); reject(e); });
  });
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Operator routes accept ADMIN_TOKEN as a Bearer token or as the Basic-auth password (so a browser can log in). */
export function adminGuard(adminToken: string) {
  const want = digest(adminToken);
  return (req: Request, res: Response, next: NextFunction) => {
    const header = req.get('authorization') ?? '';
    let given: string | undefined;
    const bearer = /^Bearer\s+(.+)$/i.exec(header);
    const basic = /^Basic\s+(.+)$/i.exec(header);
    if (bearer) given = bearer[1].trim();
    else if (basic) {
      const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
      given = decoded.slice(decoded.indexOf(':') + 1);
    }
    if (given !== undefined && timingSafeEqual(digest(given), want)) return next();
    res.setHeader('WWW-Authenticate', 'Basic realm="gateway admin", charset="UTF-8"');
    res.status(401).json(new AppError('UNAUTHORIZED', 'Admin token required').toBody());
  };
}

/** How deep Bull Board shows a job's data; a dead-lettered job can be nested thousands of levels. */
const BOARD_DATA_DEPTH = 32;

/**
 * `value` with everything below `depth` levels replaced by a marker: Bull Board answers the job
 * list with JSON.stringify, which overflows the stack on a job nested ~5,000 levels deep and
 * left the whole list (and so the failed jobs an operator must see) answering 500.
 */
function cutDepth(value: unknown, depth = BOARD_DATA_DEPTH): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (depth === 0) return `[nested deeper than ${BOARD_DATA_DEPTH} levels; read the job from Redis or the dead-letter CLI]`;
  if (Array.isArray(value)) return value.map((v) => cutDepth(v, depth - 1));
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, cutDepth(v, depth - 1)]));
}

/** Bull Board at /admin/queues listing every queue, behind ADMIN_TOKEN. */
export function adminRouter(deps: Deps): Router {
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath('/admin/queues');
  const adapters = Object.values(deps.queues).map((q) => {
    const adapter = new BullMQAdapter(q);
    adapter.setFormatter('data', (data) => cutDepth(data));
    adapter.setFormatter('returnValue', (value) => cutDepth(value));
    return adapter;
  });
  createBullBoard({ queues: adapters, serverAdapter });
  const router = express.Router();
  router.use('/admin/queues', adminGuard(deps.config.ADMIN_TOKEN), serverAdapter.getRouter());
  return router;
}

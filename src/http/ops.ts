import { timingSafeEqual, createHash } from 'node:crypto';
import express, { type Request, type Response, type NextFunction, type Router } from 'express';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import { watchPool } from '../connection-watch.js';
import { createSql, type Sql } from '../db.js';
import type { Deps } from '../deps.js';
import { AppError } from '../errors.js';

/** Liveness, readiness and Prometheus metrics. Unauthenticated by design: no tenant data. */
export function opsRouter(deps: Deps): Router {
  const router = express.Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // A connection of its own asks PostgreSQL itself, so an exhausted pool (every connection
  // held by a lock, a slow statement) is told apart from a server that does not answer.
  let probe: Sql | undefined;
  const server = () => {
    if (!probe) {
      const own: Sql = createSql(deps.config.DATABASE_URL, {
        max: 1,
        statementTimeoutMs: 2000,
        onClose: watchPool('readiness', deps, () => own`SELECT 1`),
      });
      probe = own;
      deps.closers.push(() => own.end({ timeout: 1 }));
    }
    return probe;
  };
  router.get('/readyz', async (_req, res) => {
    const replicated = deps.readSql !== deps.sql;
    const [reachable, pool, redisUp, replicaUp] = await Promise.allSettled([
      withTimeout(server()`SELECT 1`, 2000),
      withTimeout(deps.sql`SELECT 1`, 2000),
      withTimeout(deps.redis.ping(), 2000),
      replicated ? withTimeout(deps.readSql`SELECT 1`, 2000) : Promise.resolve(),
    ]);
    const postgres = reachable.status === 'fulfilled' ? 'ok' : 'down';
    // `exhausted`: PostgreSQL answers, but none of this process's connections is free to.
    const postgresPool = pool.status === 'fulfilled' ? 'ok' : postgres === 'ok' ? 'exhausted' : 'down';
    const redis = redisUp.status === 'fulfilled' ? 'ok' : 'down';
    const ok = postgresPool === 'ok' && redis === 'ok';
    // Reported, never required: without its replica the service reads from the primary.
    const replica = replicated ? { postgres_replica: replicaUp.status === 'fulfilled' ? 'ok' : 'down' } : {};
    res.status(ok ? 200 : 503).json({ status: ok ? 'ok' : 'unavailable', postgres, postgres_pool: postgresPool, redis, ...replica });
  });
  deps.metrics.watchQueues(deps.queues, { stuckAfterMs: deps.config.JOB_STUCK_MS });
  deps.metrics.watchPool(deps.sql);
  deps.metrics.watchReplica(deps);
  router.get('/metrics', async (_req, res) => {
    res.setHeader('Content-Type', deps.metrics.registry.contentType);
    res.send(await deps.metrics.registry.metrics());
  });
  return router;
}

function withTimeout<T>(p: PromiseLike<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('timeout')), ms);
    Promise.resolve(p).then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Methods that only read: a cross-site request can trigger them but not read their answer. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Whether a request comes from a page of this very origin. Browsers send Sec-Fetch-Site on
 * every request and Origin on every non-GET one, so a request carrying neither is not a
 * browser's: it is refused too, as it cannot prove where it came from (such a client can send
 * the Bearer token instead). Another port of the same host is `same-site`, not same-origin.
 */
function fromSameOrigin(req: Request, publicOrigin: string): boolean {
  const site = req.get('sec-fetch-site');
  if (site !== undefined) return site === 'same-origin';
  const origin = req.get('origin');
  if (!origin || origin === 'null') return false;
  if (origin === publicOrigin) return true;
  try {
    return new URL(origin).host === req.get('host');
  } catch {
    return false;
  }
}

/**
 * Operator routes accept ADMIN_TOKEN as a Bearer token or as the Basic-auth password (so a
 * browser can log in). A browser replays cached Basic credentials on any request to the host,
 * including one a hostile page makes it send, so Basic only authorises a request that changes
 * something (any method but GET/HEAD/OPTIONS) when it comes from the same origin; a Bearer
 * token is never sent by a browser on its own and needs no such check.
 */
function adminGuard(adminToken: string, publicBaseUrl: string) {
  const want = digest(adminToken);
  const publicOrigin = new URL(publicBaseUrl).origin;
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
    if (given !== undefined && timingSafeEqual(digest(given), want)) {
      if (bearer || SAFE_METHODS.has(req.method) || fromSameOrigin(req, publicOrigin)) return next();
      return void res
        .status(403)
        .json(
          new AppError(
            'FORBIDDEN',
            'Changes through Basic credentials must come from the board itself (same origin); scripts send the admin token as a Bearer header',
          ).toBody(),
        );
    }
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
  // Shards are named `ledger.2of4`: with `.` as the delimiter Bull Board lists them in a group under their queue.
  const adapters = deps.queues.all.map(({ bull }) => {
    const adapter = new BullMQAdapter(bull, { delimiter: '.' });
    adapter.setFormatter('data', (data) => cutDepth(data));
    adapter.setFormatter('returnValue', (value) => cutDepth(value));
    return adapter;
  });
  createBullBoard({ queues: adapters, serverAdapter });
  const router = express.Router();
  router.use('/admin/queues', adminGuard(deps.config.ADMIN_TOKEN, deps.config.PUBLIC_BASE_URL), serverAdapter.getRouter());
  return router;
}

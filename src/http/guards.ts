import type { Request, Response } from 'express';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { authenticate, requireScope, type Principal } from '../auth/api-keys.js';
import type { Scope } from '../auth/scopes.js';
import type { Deps } from '../deps.js';
import { AppError } from '../errors.js';
import { redisReady } from '../availability.js';

/** Authenticates a request and checks its scope; throws the 401/403 AppError otherwise. */
export async function authenticateRequest(deps: Deps, req: Request, scope: Scope, options: { appIdRequired: boolean }): Promise<Principal> {
  const auth = await authenticate(
    deps.sql,
    { authorization: req.get('authorization'), appId: req.get('x-service-app-id') },
    options,
  );
  if (!auth.ok) throw AppError.from(auth.error);
  const scoped = requireScope(auth.value, scope);
  if (!scoped.ok) throw AppError.from(scoped.error);
  return scoped.value;
}

export interface RequestGuards {
  /** Spends one request of the application's budget; throws 429 (or 503 when Redis is down). */
  rateLimit(appId: string, res: Response): Promise<void>;
}

/**
 * Per-application budget of RATE_LIMIT_PER_MINUTE, counted in Redis so every web process
 * draws on the same one. Headers follow the IETF RateLimit draft plus Retry-After on 429.
 */
export function createGuards(deps: Deps): RequestGuards {
  const limit = deps.config.RATE_LIMIT_PER_MINUTE;
  const limiter = new RateLimiterRedis({
    storeClient: deps.redis,
    keyPrefix: `${deps.config.REDIS_PREFIX}:rl`,
    points: limit,
    duration: 60,
  });
  const setHeaders = (res: Response, r: RateLimiterRes) => {
    res.setHeader('RateLimit-Limit', String(limit));
    res.setHeader('RateLimit-Remaining', String(Math.max(0, r.remainingPoints)));
    res.setHeader('RateLimit-Reset', String(Math.ceil(r.msBeforeNext / 1000)));
  };
  return {
    async rateLimit(appId, res) {
      await redisReady(deps.redis);
      try {
        setHeaders(res, await limiter.consume(appId, 1));
      } catch (err) {
        if (err instanceof RateLimiterRes) {
          setHeaders(res, err);
          const retry = String(Math.max(1, Math.ceil(err.msBeforeNext / 1000)));
          throw new AppError('RATE_LIMITED', `Rate limit of ${limit} requests per minute exceeded; retry in ${retry} s`, undefined, {
            headers: { 'Retry-After': retry },
          });
        }
        throw new AppError('UNAVAILABLE', 'Rate limiter unavailable; retry shortly', undefined, { cause: err, headers: { 'Retry-After': '1' } });
      }
    },
  };
}

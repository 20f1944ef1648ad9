import type { Request, Response } from 'express';
import { requireScope, type Principal } from '../auth/api-keys.js';
import type { Scope } from '../auth/scopes.js';
import type { ChangeStamps } from '../change-stamps.js';
import type { Deps } from '../deps.js';
import { AppError } from '../errors.js';
import { redisReady } from '../availability.js';
import { createWindowLimiter, type LimitVerdict } from '../rate-limit.js';
import { authenticateRequest, type RequestCredentials } from '../portal/auth.js';

/** What authentication reads from a request: API key headers, or the portal cookie and CSRF header. */
export const credentialsOf = (req: Request): RequestCredentials => ({
  authorization: req.get('authorization'),
  appId: req.get('x-service-app-id'),
  cookie: req.get('cookie'),
  csrfToken: req.get('x-csrf-token'),
  method: req.method,
  path: req.path,
});

export interface RequestGuards {
  /** Authenticates a request and checks its scope; throws the 401/403 AppError otherwise. */
  authenticate(req: Request, scope: Scope, options: { appIdRequired: boolean }): Promise<Principal>;
  /**
   * Spends `points` requests (default 1) of the application's budget in one Redis command;
   * throws 429 (or 503 when Redis is down). A GraphQL document spends one per mutation it runs.
   */
  rateLimit(appId: string, res: Response, points?: number): Promise<void>;
}

/**
 * Per-application budget of RATE_LIMIT_PER_MINUTE, counted in Redis so every web process
 * draws on the same one (src/rate-limit.ts). Headers follow the IETF RateLimit draft plus
 * Retry-After on 429.
 */
export function createGuards(deps: Deps, stamps: ChangeStamps): RequestGuards {
  const limit = deps.config.RATE_LIMIT_PER_MINUTE;
  const limiter = createWindowLimiter(deps.redis, `${deps.config.REDIS_PREFIX}:rl`, limit, 60);
  return {
    async authenticate(req, scope, options) {
      const auth = await authenticateRequest(deps.sql, stamps, credentialsOf(req), options);
      if (!auth.ok) throw AppError.from(auth.error);
      const scoped = requireScope(auth.value, scope);
      if (!scoped.ok) throw AppError.from(scoped.error);
      return scoped.value;
    },
    async rateLimit(appId, res, points = 1) {
      await redisReady(deps.redis);
      let verdict: LimitVerdict;
      try {
        verdict = await limiter.consume(appId, points);
      } catch (err) {
        throw new AppError('UNAVAILABLE', 'Rate limiter unavailable; retry shortly', undefined, {
          cause: err,
          headers: { 'Retry-After': '1' },
        });
      }
      res.setHeader('RateLimit-Limit', String(limit));
      res.setHeader('RateLimit-Remaining', String(verdict.remaining));
      res.setHeader('RateLimit-Reset', String(Math.ceil(verdict.resetMs / 1000)));
      if (verdict.allowed) return;
      const retry = String(Math.max(1, Math.ceil(verdict.resetMs / 1000)));
      throw new AppError('RATE_LIMITED', `Rate limit of ${limit} requests per minute exceeded; retry in ${retry} s`, undefined, {
        headers: { 'Retry-After': retry },
      });
    },
  };
}

import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Deps } from '../deps.js';
import { AppError, fail, ok, type Result } from '../errors.js';

/**
 * The guessing budget of link-code activations, counted in Redis so every web and worker
 * process draws on the same one: LINK_CODE_ATTEMPTS_PER_USER per platform user per 15
 * minutes and LINK_CODE_ATTEMPTS_PER_APP per application per minute.
 *
 * An attempt is charged before the code is looked up (so parallel guesses cannot slip past a
 * check-then-charge race) and refunded when it succeeds: only wrong, expired or used codes
 * spend the budget.
 */
export interface GuessThrottle {
  charge(appId: string, platformUserId: string): Promise<Result<void>>;
  refund(appId: string, platformUserId: string): Promise<void>;
}

const USER_WINDOW_S = 15 * 60;
const APP_WINDOW_S = 60;

/** Built once per process (the limiters are plain config over the shared Redis). */
export function createGuessThrottle(deps: Deps): GuessThrottle {
  const prefix = `${deps.config.REDIS_PREFIX}:lc`;
  const perUser = new RateLimiterRedis({
    storeClient: deps.redis,
    keyPrefix: `${prefix}:pu`,
    points: deps.config.LINK_CODE_ATTEMPTS_PER_USER,
    duration: USER_WINDOW_S,
  });
  const perApp = new RateLimiterRedis({
    storeClient: deps.redis,
    keyPrefix: `${prefix}:app`,
    points: deps.config.LINK_CODE_ATTEMPTS_PER_APP,
    duration: APP_WINDOW_S,
  });

  const spend = async (limiter: RateLimiterRedis, key: string, who: string): Promise<Result<void>> => {
    try {
      await limiter.consume(key, 1);
      return ok(undefined);
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) {
        throw new AppError('UNAVAILABLE', 'Link-code throttle unavailable; retry shortly', undefined, {
          cause: err,
          headers: { 'Retry-After': '1' },
        });
      }
      const retry = Math.max(1, Math.ceil(err.msBeforeNext / 1000));
      return fail('LINK_CODE_ATTEMPTS_EXCEEDED', `Too many link-code attempts ${who}; retry in ${retry} s`, [
        { message: 'throttled', retry_after_seconds: retry },
      ]);
    }
  };

  return {
    async charge(appId, platformUserId) {
      const user = await spend(perUser, `${appId}:${platformUserId}`, 'for this platform user');
      if (!user.ok) return user;
      const app = await spend(perApp, appId, 'for this application');
      // The platform user's point is not its fault when the application as a whole is throttled.
      if (!app.ok) await perUser.reward(`${appId}:${platformUserId}`, 1).catch(() => {});
      return app;
    },
    async refund(appId, platformUserId) {
      await Promise.all([perUser.reward(`${appId}:${platformUserId}`, 1), perApp.reward(appId, 1)]);
    },
  };
}

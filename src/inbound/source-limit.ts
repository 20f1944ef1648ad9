import type { Request, Response } from 'express';
import type { Deps } from '../deps.js';
import { AppError } from '../errors.js';
import { sendError } from '../http/errors.js';
import { createWindowLimiter, type LimitVerdict, type WindowLimiter } from '../rate-limit.js';

/** Writes the receiver's 429: Retry-After in whole seconds, until the window allows again. */
export function tooMany(res: Response, verdict: LimitVerdict, error: string): void {
  sendError(
    res,
    new AppError('RATE_LIMITED', error, undefined, { headers: { 'Retry-After': String(Math.max(1, Math.ceil(verdict.resetMs / 1000))) } }),
  );
}

/** The address a request is counted under: the socket's peer, or X-Forwarded-For's as TRUST_PROXY allows. */
const sourceOf = (req: Request) => req.ip ?? req.socket.remoteAddress ?? 'unknown';

export interface SourceLimits {
  /** Spends one request of the source's /webhooks/* budget; false when it answered 429. */
  inbound(req: Request, res: Response): Promise<boolean>;
  /** Spends one of the source's verification-handshake budget; false when it answered 429. */
  handshake(req: Request, res: Response): Promise<boolean>;
}

/**
 * Per-source-address budgets on the unauthenticated inbound paths, counted in Redis so every
 * web process shares them. They come before any lookup, so a flood of forged or guessed
 * requests from one address costs a Redis round trip each, not a database query. The
 * per-connection flood guard (INBOUND_FLOOD_PER_SECOND) still bounds each connection.
 */
export function createSourceLimits(deps: Deps): SourceLimits {
  const prefix = `${deps.config.REDIS_PREFIX}:inbound-source`;
  const perMinute = deps.config.INBOUND_PER_SOURCE_PER_MINUTE;
  // A platform address sends in bursts: leasing a hundredth of the budget saves most round trips.
  const inbound = createWindowLimiter(deps.redis, `${prefix}:all`, perMinute, 60, { lease: Math.floor(perMinute / 100) });
  const handshake = createWindowLimiter(deps.redis, `${prefix}:handshake`, deps.config.INBOUND_HANDSHAKE_PER_SOURCE_PER_MINUTE, 60);
  const spend = (limiter: WindowLimiter, error: string) => async (req: Request, res: Response) => {
    const verdict = await limiter.consume(sourceOf(req));
    if (verdict.allowed) return true;
    tooMany(res, verdict, error);
    return false;
  };
  return {
    inbound: spend(inbound, 'too many requests from this address'),
    handshake: spend(handshake, 'too many verification requests from this address'),
  };
}

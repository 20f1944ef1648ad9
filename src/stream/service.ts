import type { NextFunction, Request, Response } from 'express';
import type { Principal } from '../auth/api-keys.js';
import type { ChangeStamps } from '../change-stamps.js';
import type { Deps } from '../deps.js';
import { AppError } from '../errors.js';
import type { WakeHub } from '../ledger/wake-hub.js';
import { createRevokedKeyWatch, type StreamEndReason } from './revoked-keys.js';
import { createStreamSlots, type StreamSlot, type StreamSlots } from './slots.js';
import { createTailRegistry, type TailRegistry } from './tail.js';

/** A web process's realtime machinery, shared by the SSE endpoint and the GraphQL subscription. */
export interface StreamService {
  tails: TailRegistry;
  slots: StreamSlots;
  /**
   * Registers an open stream of a key (or portal session) so that shutdown, its revocation, or
   * its expiry can end it; returns the unregister function.
   */
  track(principal: Pick<Principal, 'keyId' | 'expiresAt'>, end: (reason: StreamEndReason) => void): () => void;
  /** Open streams in this process. */
  open(): number;
  /**
   * Ends every open stream cleanly (graceful shutdown), so clients reconnect elsewhere with
   * their last cursor, and stops the tails.
   */
  close(): Promise<void>;
}

export function createStreamService(deps: Deps, wakes: WakeHub, stamps: ChangeStamps): StreamService {
  const { config } = deps;
  const tails = createTailRegistry(deps.pools, wakes, deps.logger, {
    recheckMs: config.STREAM_RECHECK_MS,
    replicaWaitMs: config.REPLICA_WAIT_MS,
  });
  const slots = createStreamSlots(deps.redis, config.REDIS_PREFIX, deps.logger, {
    max: config.STREAM_MAX_PER_APP,
    leaseMs: config.STREAM_SLOT_LEASE_MS,
  });
  const open = new Set<(reason: StreamEndReason) => void>();
  const revokedKeys = createRevokedKeyWatch(deps.sql, stamps, deps.logger, { intervalMs: config.STREAM_RECHECK_MS });
  return {
    tails,
    slots,
    track({ keyId, expiresAt }, end) {
      open.add(end);
      deps.metrics.streamClients.inc();
      const unwatch = revokedKeys.add(keyId, end);
      // Expiry moves no change stamp, so the revocation watch would not notice it.
      const expiry = expiresAt ? setTimeout(() => end('revoked'), Math.max(0, expiresAt.getTime() - Date.now())) : undefined;
      expiry?.unref();
      return () => {
        clearTimeout(expiry);
        unwatch();
        if (open.delete(end)) deps.metrics.streamClients.dec();
      };
    },
    open: () => open.size,
    async close() {
      for (const end of [...open]) end('shutdown');
      revokedKeys.close();
      tails.close();
      await slots.close();
    },
  };
}

/** Takes one of the application's stream slots or throws the 429; the slot is released when `res` closes. */
export async function holdStreamSlot(streams: StreamService, appId: string, res: Response): Promise<StreamSlot> {
  const slot = await streams.slots.acquire(appId);
  if (!slot) {
    throw new AppError(
      'TOO_MANY_STREAMS',
      `This application already has its maximum of concurrent streams open; close one or retry later`,
      undefined,
      {
        headers: { 'Retry-After': '5' },
      },
    );
  }
  res.once('close', () => slot.release());
  return slot;
}

/**
 * Express middleware for the GraphQL-over-SSE face: a subscription connection is a stream and
 * counts against the same per-application cap, answered with a plain 429 before any stream starts.
 */
export function streamSlotGuard(streams: StreamService) {
  return async (_req: Request, res: Response, next: NextFunction) => {
    const principal = res.locals.principal as Principal;
    await holdStreamSlot(streams, principal.appId, res);
    // Like the SSE endpoint: the connection ends with the stream, so a stream ended on
    // shutdown does not leave a kept-alive socket holding the server open.
    res.shouldKeepAlive = false;
    next();
  };
}

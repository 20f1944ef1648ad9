import { unavailable } from './errors.js';

/**
 * How long a request waits for Redis to become reachable — the first connect after start-up,
 * or a reconnect already under way — before it answers 503. Long enough to ride out a
 * restart's reconnect, short enough that a client is never left hanging.
 */
export const REDIS_READY_WAIT_MS = 1_000;

/** The part of an ioredis client the readiness check uses. */
export interface ReadyTracking {
  status: string;
  once(event: 'ready', listener: () => void): unknown;
  removeListener(event: 'ready', listener: () => void): unknown;
}

/**
 * Resolves once the connection is ready, waiting at most `waitMs`; otherwise throws the
 * UNAVAILABLE AppError. Checked before request-path Redis work, so an outage answers 503 at
 * once rather than after a command times out.
 */
export async function redisReady(client: ReadyTracking, waitMs = REDIS_READY_WAIT_MS): Promise<void> {
  if (client.status === 'ready') return;
  if (client.status === 'end' || waitMs <= 0) throw unavailable('Redis');
  await new Promise<void>((resolve, reject) => {
    const onReady = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      client.removeListener('ready', onReady);
      reject(unavailable('Redis'));
    }, waitMs);
    client.once('ready', onReady);
  });
}

/** `promise`, or the UNAVAILABLE AppError for `service` once `ms` have passed. */
export function withDeadline<T>(promise: PromiseLike<T>, ms: number, service: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(unavailable(service)), ms);
    Promise.resolve(promise).then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

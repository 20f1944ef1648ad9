import { isUnavailable, unavailable } from './errors.js';

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

/** `promise`, or once `ms` have passed the UNAVAILABLE AppError for `service` (or the error `service` makes). */
export function withDeadline<T>(promise: PromiseLike<T>, ms: number, service: string | (() => Error)): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(typeof service === 'string' ? unavailable(service) : service()), ms);
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

/**
 * Runs `fn` again while it fails only because PostgreSQL or Redis is unreachable, backing off
 * up to 2 s between tries, for at most `timeoutMs`. For the one write that must not be lost
 * after a side effect outside the service has happened (a platform accepted a message): failing
 * the job there would make its retry repeat the side effect.
 */
export async function untilAvailable<T>(fn: () => Promise<T>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let pause = 100; ; pause = Math.min(pause * 2, 2_000)) {
    try {
      return await fn();
    } catch (err) {
      if (!isUnavailable(err) || Date.now() + pause > deadline) throw err;
      await new Promise((r) => setTimeout(r, pause));
    }
  }
}

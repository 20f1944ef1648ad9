import type { Logger } from './logger.js';

/**
 * Graceful shutdown on SIGTERM/SIGINT: run `stop` (stop intake, drain, close connections),
 * then exit 0. A second signal, or `stop` outliving `timeoutMs`, forces exit 1. Returns a way
 * to begin the same shutdown for another reason (once; later calls do nothing).
 */
export function onShutdownSignal(logger: Logger, timeoutMs: number, stop: () => Promise<void>): (reason: string) => void {
  let stopping = false;
  const begin = (why: Record<string, string>) => {
    stopping = true;
    logger.info(why, 'shutting down');
    const force = setTimeout(() => {
      logger.error({ timeoutMs }, 'shutdown timed out: forcing exit');
      process.exit(1);
    }, timeoutMs + 2000);
    force.unref();
    stop().then(
      () => {
        logger.info('shutdown complete');
        logger.flush?.();
        process.exit(0);
      },
      (err) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: forcing exit');
      process.exit(1);
    }
    begin({ signal });
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  return (reason) => {
    if (!stopping) begin({ reason });
  };
}

/**
 * Calls `shutdown` once the process that started this one has exited (this process was
 * handed to another parent). `npm start` runs us under `sh -c`; a SIGTERM sent to npm alone is
 * passed to that shell, which dies of it without passing it on, and left the server running
 * with nobody to stop it. Checked twice a second; the timer never keeps the process alive.
 */
export function stopWhenOrphaned(shutdown: (reason: string) => void): void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    shutdown('parent process exited');
  }, 500);
  timer.unref();
}

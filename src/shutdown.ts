import type { Logger } from './logger.js';

/**
 * Graceful shutdown on SIGTERM/SIGINT: run `stop` (stop intake, drain, close connections),
 * then exit 0. A second signal, or `stop` outliving `timeoutMs`, forces exit 1.
 */
export function onShutdownSignal(logger: Logger, timeoutMs: number, stop: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: forcing exit');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
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
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
}

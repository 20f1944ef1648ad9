import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';

/**
 * The last resort for a promise rejection no code handled. Node's default ends the process,
 * and with it every request and job in flight for every tenant (a driver's discarded promise
 * did exactly that under backend terminations). A rejection nobody awaited leaves nothing
 * half-done that the process depends on, unlike a thrown exception, so the process keeps
 * serving: the rejection is logged with its stack and counted
 * (`process_unhandled_rejections_total`), and each one is a bug to fix.
 */
export function survivingUnhandledRejections(logger: Logger, metrics: Metrics): () => void {
  const onRejection = (reason: unknown) => {
    metrics.unhandledRejections.inc();
    logger.error({ err: reason }, 'unhandled promise rejection (the process keeps running)');
  };
  process.on('unhandledRejection', onRejection);
  return () => void process.off('unhandledRejection', onRejection);
}

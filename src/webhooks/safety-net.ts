import type { Job } from 'bullmq';
import type { Deps } from '../deps.js';

/** How long before it is due the job of first attempts still running is pushed back. */
const RENEW_BEFORE_MS = 5_000;

/**
 * Holds the safety-net job of first attempts running in this process as a lease. While they
 * run, the job is pushed back before it comes due, so it never makes a first attempt this
 * process is still making (a slow confirm, a wait for a broker slot, an outcome write behind
 * a busy database: sending it again would be a duplicate). Once every outcome is written the
 * job is removed, as it would find nothing to do. Should this process die, or its first
 * attempts fail, the job is left to run: that is what it is for.
 */
export function holdSafetyNet(deps: Pick<Deps, 'logger'>, net: Job, done: Promise<boolean>, delayMs: number): void {
  let timer: NodeJS.Timeout | undefined;
  let over = false;
  const renewLater = () => {
    timer = setTimeout(
      () =>
        net.changeDelay(delayMs).then(
          () => !over && renewLater(),
          // Already running or gone: it finds the deliveries written and sends nothing twice.
          (err) => deps.logger.debug({ err, jobId: net.id }, 'could not push back a first-attempts safety net'),
        ),
      Math.max(0, delayMs - RENEW_BEFORE_MS),
    );
    // The lease must not keep a stopping process alive: the job then runs as a safety net should.
    timer.unref();
  };
  renewLater();
  void done.then(async (written) => {
    over = true;
    clearTimeout(timer);
    if (written)
      await net.remove().catch((err) => deps.logger.debug({ err, jobId: net.id }, 'could not remove a first-attempts safety net'));
  });
}

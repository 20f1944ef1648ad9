import { z } from 'zod';

/** Default wait between a send and its simulated `delivered` report (ms). */
export const SANDBOX_DELIVERED_AFTER_MS = 1000;
/** Default wait between a send and its simulated `read` report (ms). */
export const SANDBOX_READ_AFTER_MS = 3000;

const delay = (what: string) =>
  z
    .number({ error: `${what} must be a number of milliseconds` })
    .int()
    .min(0)
    .max(3_600_000, `${what} must be at most 3600000 (one hour)`)
    .optional();

/**
 * The sandbox needs no account and no credentials: its config only shapes the simulation.
 * Both waits count from the moment the send is recorded; a `read` due before `delivered`
 * still comes after it in effect, since statuses never move a message backwards.
 */
export const sandboxConfig = z.strictObject({
  /** When the simulated end user's device reports the message delivered. */
  delivered_after_ms: delay('delivered_after_ms'),
  /** When the simulated end user reads it. */
  read_after_ms: delay('read_after_ms'),
});
export type SandboxConfig = z.infer<typeof sandboxConfig>;

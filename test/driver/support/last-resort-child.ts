/**
 * Child process for pool-bounds.test.ts: a promise rejected with nobody to handle it. Node's
 * default would end the process (exit 1); with the last-resort handler it logs, counts and
 * carries on. Prints the counter, then exits 0 by itself.
 */
import { survivingUnhandledRejections } from '../../../src/last-resort.js';
import { createLogger } from '../../../src/logger.js';
import { createMetrics } from '../../../src/metrics.js';

const metrics = createMetrics({ defaults: false });
survivingUnhandledRejections(createLogger('error'), metrics);
void Promise.reject(new Error('nobody awaited this'));
await new Promise((r) => setTimeout(r, 100));
const counted = (await metrics.registry.getSingleMetricAsString('process_unhandled_rejections_total')).match(/total (\d+)/)?.[1];
process.stdout.write(`still running, counted ${counted}\n`);

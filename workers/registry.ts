import type { QueueName } from '../src/config.js';
import type { ProcessorDef } from './host.js';
import { ledgerProcessor } from './ledger.js';

/** The processor of each queue; a queue without one here is not served yet. */
export const PROCESSORS: Partial<Record<QueueName, ProcessorDef>> = {
  ledger: ledgerProcessor,
};

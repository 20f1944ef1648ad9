import type { QueueName } from '../src/config.js';
import type { ProcessorDef } from './host.js';
import { ledgerProcessor } from './ledger.js';
import { maintenanceProcessor } from './maintenance.js';
import { sendProcessor } from './send.js';
import { inboundProcessor } from './inbound.js';
import { transcriptionProcessor } from './transcription.js';
import { webhookProcessor } from './webhook.js';

/** One processor per queue, typed by its queue's job data. */
export type Processors = { [Q in QueueName]: ProcessorDef<Q> };

/** The processor of each queue: a queue of the catalog without one here does not compile. */
export const PROCESSORS = {
  ledger: ledgerProcessor,
  send: sendProcessor,
  inbound: inboundProcessor,
  transcription: transcriptionProcessor,
  webhook: webhookProcessor,
  maintenance: maintenanceProcessor,
} satisfies Processors;

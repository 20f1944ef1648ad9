import type { QueueName } from '../src/config.js';
import type { ProcessorDef } from './host.js';
import { ledgerProcessor } from './ledger.js';
import { maintenanceProcessor } from './maintenance.js';
import { sendProcessor } from './send.js';
import { inboundProcessor } from './inbound.js';
import { transcriptionProcessor } from './transcription.js';
import { webhookProcessor } from './webhook.js';

/** The processor of each queue; a queue without one here is not served yet. */
export const PROCESSORS: Partial<Record<QueueName, ProcessorDef>> = {
  ledger: ledgerProcessor,
  send: sendProcessor,
  inbound: inboundProcessor,
  transcription: transcriptionProcessor,
  webhook: webhookProcessor,
  maintenance: maintenanceProcessor,
};

import type { Deps } from '../deps.js';
import type { BlobStore } from '../files/storage.js';
import { pruneFiles } from '../files/files.js';
import { pruneIdempotencyKeys } from '../idempotency.js';
import { pruneLinkCodes } from '../identity/link-codes.js';
import { maintainEventPartitions } from '../ledger/partitions.js';
import { pruneMessages } from '../messages/messages.js';
import { prunePortalSessions } from '../portal/sessions.js';
import { purgeOldLogs } from '../webhooks/attempt-log.js';
import type { MaintenanceTask } from '../queues.js';

/** What each maintenance task does; a task of the catalog without an entry here does not compile. */
export const MAINTENANCE = {
  'prune-idempotency-keys': (deps) => pruneIdempotencyKeys(deps.sql, deps.config.IDEMPOTENCY_KEY_RETENTION_HOURS),
  'prune-link-codes': (deps) => pruneLinkCodes(deps.sql, deps.config.LINK_CODE_RETENTION_DAYS),
  'prune-files': (deps, files) => pruneFiles(deps.sql, deps.config.FILE_RETENTION_DAYS, files),
  'prune-messages': (deps) => pruneMessages(deps.sql, deps.config.MESSAGE_RETENTION_DAYS),
  'prune-portal-sessions': (deps) => prunePortalSessions(deps.sql, deps.config.PORTAL_SESSION_RETENTION_DAYS),
  'prune-webhook-logs': (deps) => purgeOldLogs(deps),
  'event-partitions': (deps) => maintainEventPartitions(deps.sql, deps.config.EVENT_RETENTION_DAYS),
} satisfies Record<MaintenanceTask, (deps: Deps, files: BlobStore | undefined) => Promise<unknown>>;

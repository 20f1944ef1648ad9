import type { Config, RedisTarget } from '../config.js';
import type { ConnectionObserver } from '../connection-watch.js';
import { createSubscriber, type Outgoing, type PubSubMode, shardedChannel } from '../pubsub.js';
import type { StoredError } from '../messages/delivery.js';
import type { CommitOutcome } from './commit-waiter.js';
import type { CommittedEvent } from './write.js';

/**
 * After a commit, the ledger worker tells each web process that enqueued events of the batch
 * where they landed: one message per web process and batch, on that process's own channel.
 * The report is the worker's word on its own outcome (like a job's result), sent only after
 * the commit; a lost one only delays an answer, since the waiter also checks the ledger
 * periodically.
 */
export interface ReportChannels extends PubSubMode {
  /** A web process's channel: `<prefix>:committed:<reply id>` classic, `{<reply id>}:<prefix>:committed` sharded (src/pubsub.ts). */
  of(replyTo: string): string;
}

export const reportChannels = (config: Pick<Config, 'REDIS_PREFIX' | 'REDIS_SHARDED_PUBSUB'>): ReportChannels => {
  const prefix = config.REDIS_PREFIX;
  const sharded = config.REDIS_SHARDED_PUBSUB;
  return { sharded, of: (replyTo) => (sharded ? shardedChannel(replyTo, prefix, 'committed') : `${prefix}:committed:${replyTo}`) };
};

/** What a send's worker reports to the web process waiting on it: the message's final state. */
export type SendOutcome = { status: 'sent'; external_message_id: string } | { status: 'failed'; error: StoredError };

/**
 * [app_id, id, seq, created_at] per committed event; [app_id, id, reason] per event the
 * database refused for good (its data), so its caller gets an answer instead of waiting out
 * its bound; [app_id, id, outcome] per settled send (the message id). A process that does not
 * know a form ignores it.
 */
type ReportEntry = [string, string, number, string] | [string, string, string] | [string, string, SendOutcome];

/** Adds one report per web process waiting on events of `committed` to `out`. */
export function addCommitReports(
  out: Outgoing[],
  channels: ReportChannels,
  committed: CommittedEvent[],
  replyTo: Map<string, string>,
): void {
  const byProcess = new Map<string, ReportEntry[]>();
  for (const e of committed) {
    const to = replyTo.get(e.id);
    if (!to) continue;
    let list = byProcess.get(to);
    if (!list) byProcess.set(to, (list = []));
    list.push([e.app_id, e.id, e.seq, e.created_at]);
  }
  for (const [to, entries] of byProcess) out.push([channels.of(to), JSON.stringify(entries)]);
}

/** Adds the report of events refused for good to `out` (each `reason` is shown to the event's caller). */
export function addRefusalReport(
  out: Outgoing[],
  channels: ReportChannels,
  replyTo: string,
  refused: { app_id: string; id: string; reason: string }[],
): void {
  const entries: ReportEntry[] = refused.map((e) => [e.app_id, e.id, e.reason]);
  if (entries.length) out.push([channels.of(replyTo), JSON.stringify(entries)]);
}

/** Adds one report per web process waiting on sends of `settled` to `out`. */
export function addSendReports(
  out: Outgoing[],
  channels: ReportChannels,
  settled: { replyTo?: string; appId: string; id: string; outcome: SendOutcome }[],
): void {
  const byProcess = new Map<string, ReportEntry[]>();
  for (const s of settled) {
    if (!s.replyTo) continue;
    let list = byProcess.get(s.replyTo);
    if (!list) byProcess.set(s.replyTo, (list = []));
    list.push([s.appId, s.id, s.outcome]);
  }
  for (const [to, entries] of byProcess) out.push([channels.of(to), JSON.stringify(entries)]);
}

export interface CommitReportSubscription {
  /** Resolves once the subscription is active. */
  ready: Promise<void>;
  close(): Promise<void>;
}

export interface ReportHandlers {
  /** An event's commit (or its refusal). */
  commit(appId: string, id: string, outcome: CommitOutcome): void;
  /** A send's final state. */
  send(appId: string, id: string, outcome: SendOutcome): void;
}

/** Subscribes to this web process's reports: event commits and settled sends, on one channel. */
export function subscribeCommitReports(
  redis: RedisTarget,
  channels: ReportChannels,
  replyTo: string,
  observer: ConnectionObserver,
  on: ReportHandlers,
): CommitReportSubscription {
  const { logger } = observer;
  const sub = createSubscriber(redis, channels, 'commit reports', observer);
  const channel = channels.of(replyTo);
  sub.onMessage((ch, message) => {
    if (ch !== channel) return;
    let entries: ReportEntry[];
    try {
      entries = JSON.parse(message) as ReportEntry[];
    } catch {
      return;
    }
    if (!Array.isArray(entries)) return;
    for (const e of entries) {
      if (!Array.isArray(e) || typeof e[0] !== 'string' || typeof e[1] !== 'string') continue;
      if (typeof e[2] === 'number' && typeof e[3] === 'string') on.commit(e[0], e[1], { seq: e[2], created_at: e[3] });
      else if (typeof e[2] === 'string' && e.length === 3) on.commit(e[0], e[1], { refused: e[2] });
      else if (isSendOutcome(e[2])) on.send(e[0], e[1], e[2]);
    }
  });
  const ready = sub.subscribe(channel).then(() => undefined);
  ready.catch((err) => logger.warn({ err }, 'commit report subscribe failed'));
  return {
    ready,
    close: () => sub.close(),
  };
}

function isSendOutcome(v: unknown): v is SendOutcome {
  const o = v as SendOutcome | null;
  if (typeof o !== 'object' || o === null) return false;
  if (o.status === 'sent') return typeof o.external_message_id === 'string';
  return o.status === 'failed' && typeof o.error === 'object' && o.error !== null && typeof o.error.code === 'string';
}

import type { ReadPools, Sql } from '../db.js';
import type { WakeHub } from '../ledger/wake-hub.js';
import { headSeq, listEvents, readThrough, type EventRecord } from '../ledger/read.js';
import { toEventNode, type EventNode } from '../ledger/shape.js';
import type { Logger } from '../logger.js';

/**
 * An event read once by a tail and shared by every connection it goes to: the GraphQL node and
 * the SSE frame are each built at most once, however many connections receive the event.
 */
export class TailEvent {
  private nodeMemo?: EventNode;
  private frameMemo?: string;
  private bytesMemo?: Buffer;
  /**
   * @param batch the tail read that produced the event (0 for catch-up reads). Sinks judge a
   * client's backlog once per batch, so a burst of events read together never counts against it.
   * @param group that read's events, for the streams that take all of them in one write.
   */
  constructor(
    readonly record: EventRecord,
    readonly batch = 0,
    readonly group?: TailBatch,
  ) {}

  get node(): EventNode {
    return (this.nodeMemo ??= toEventNode(this.record));
  }

  /** `id: <cursor>` / `data: <event JSON>` / blank line. */
  get frame(): string {
    return (this.frameMemo ??= `id: ${this.record.cursor}\ndata: ${JSON.stringify(this.node)}\n\n`);
  }

  /** The frame encoded once, so writing it to many sockets copies bytes instead of re-encoding text. */
  get bytes(): Buffer {
    return (this.bytesMemo ??= Buffer.from(this.frame, 'utf8'));
  }
}

/**
 * The events one tail read dispatched, in order. A stream without a filter takes every one of
 * them: their frames are joined once, and each such stream gets the batch in a single write.
 */
export class TailBatch {
  readonly events: TailEvent[] = [];
  private bytesMemo?: Buffer;

  constructor(readonly id: number) {}

  add(record: EventRecord): TailEvent {
    const event = new TailEvent(record, this.id, this);
    this.events.push(event);
    return event;
  }

  get bytes(): Buffer {
    return (this.bytesMemo ??= this.events.length === 1 ? this.events[0].bytes : Buffer.concat(this.events.map((e) => e.bytes)));
  }
}

/** One connection as its application's tail sees it. */
export interface TailMember {
  /** Every event at or below this position has been considered for the member (sent or filtered out). */
  pos: number;
  /** Set once the member has caught up; until then the tail leaves it alone. */
  live: boolean;
  matches(event: EventRecord): boolean;
  /** Takes a matching event synchronously; a member that cannot keep up disconnects itself. */
  push(event: TailEvent): void;
  /** Called after each batch the tail dispatched, so a member can write what it took in one go. */
  flush?(): void;
}

export interface AppTail {
  readonly appId: string;
  /** Highest position this tail has read and dispatched. Valid once `ready` resolved. */
  readonly pos: number;
  readonly ready: Promise<void>;
  /** Asks for a read; reads are coalesced (at most one in flight, at most one more queued). */
  poke(seq?: number): void;
}

export interface TailOptions {
  /** Interval of the re-check that bounds the delay a lost wake can cause (ms). */
  recheckMs: number;
  /** Events per ledger query. */
  pageSize?: number;
  /** Longest a read waits for the replica to replay a position it must see (ms; REPLICA_WAIT_MS). @default 0 */
  replicaWaitMs?: number;
}

export interface TailRegistry {
  /** Adds a member to its application's tail, starting the tail if it is the first. */
  join(appId: string, member: TailMember): { tail: AppTail; leave(): void };
  /** Tails currently running (one per application with open streams). */
  size(): number;
  /**
   * Runs a ledger read of `appId` where every event up to `seq` is visible: the replica once it
   * has replayed it (waiting at most `replicaWaitMs`), else the primary (`readThrough`).
   */
  read<T>(appId: string, seq: number, read: (sql: Sql) => Promise<T>): Promise<T>;
  /** Ledger queries the tails have run, for tests and the benchmark. */
  readonly stats: { queries: number; wakes: number; skippedWakes: number };
  close(): void;
}

/**
 * The per-application tail of docs/architecture.md (Reading): one reader per application per web process. A wake
 * (or the periodic re-check) triggers one ledger query after the tail's position; its events
 * are dispatched in memory, in order, to every live member whose filter matches. Wakes are
 * only hints: the position comes from what the query returned, so a duplicate, stale or
 * lost wake can delay an event by at most `recheckMs`, never skip or repeat it.
 *
 * With a read replica the tail reads there, and a wake's position is what it must not read
 * behind: the replica's ledger is a gap-free prefix of the primary's, so until it has replayed
 * that position the tail waits (bounded), then reads from the primary.
 */
export function createTailRegistry(pools: ReadPools, wakes: WakeHub, logger: Logger, options: TailOptions): TailRegistry {
  const pageSize = options.pageSize ?? 500;
  const readAt = <T>(appId: string, seq: number, read: (sql: Sql) => Promise<T>) =>
    readThrough(pools, appId, seq, options.replicaWaitMs ?? 0, read);
  const tails = new Map<string, { tail: AppTail; members: Set<TailMember>; stop(): void }>();
  const stats = { queries: 0, wakes: 0, skippedWakes: 0 };
  let batches = 0;

  const start = (appId: string) => {
    const members = new Set<TailMember>();
    let pos = 0;
    /** The highest position a wake announced as committed. */
    let announced = 0;
    let reading = false;
    let again = false;
    let stopped = false;

    const dispatch = (rows: EventRecord[]) => {
      const batch = new TailBatch(++batches);
      for (const row of rows) {
        let event: TailEvent | undefined;
        for (const m of members) {
          if (!m.live || row.seq <= m.pos) continue;
          m.pos = row.seq;
          if (m.matches(row)) m.push((event ??= batch.add(row)));
        }
        pos = row.seq;
      }
      for (const m of members) m.flush?.();
    };

    const read = async () => {
      if (reading) {
        again = true;
        return;
      }
      reading = true;
      try {
        do {
          again = false;
          for (;;) {
            stats.queries++;
            const after = pos;
            const rows = await readAt(appId, announced > after ? announced : 0, (sql) =>
              listEvents(sql, appId, { afterSeq: after }, pageSize),
            );
            if (stopped) return;
            dispatch(rows);
            if (rows.length < pageSize) break;
          }
        } while (again && !stopped);
      } catch (err) {
        // The next wake or re-check reads again from the same position: nothing is lost.
        logger.warn({ err, appId }, 'stream tail read failed');
      } finally {
        reading = false;
      }
    };

    // Listening before `ready` asks whether the application's wakes arrive (sharded pub/sub
    // subscribes per application); only wakes after that can poke the tail.
    const unsubscribe = wakes.on(appId, (_appId, seq) => tail.poke(seq));
    const tail: AppTail = {
      appId,
      get pos() {
        return pos;
      },
      // Subscribe first, then read the head: a commit after the head read wakes us, and one
      // before it is below the starting position — no window in between.
      ready: wakes.subscribed(appId).then(async () => {
        pos = await readAt(appId, 0, (sql) => headSeq(sql, appId));
      }),
      poke(seq) {
        stats.wakes++;
        if (seq !== undefined) announced = Math.max(announced, seq);
        // A wake for a position already dispatched (duplicate or late) needs no query.
        if (seq !== undefined && seq <= pos) {
          stats.skippedWakes++;
          return;
        }
        void tail.ready.then(read, () => undefined);
      },
    };
    const timer = setInterval(() => tail.poke(), options.recheckMs);
    timer.unref();
    const entry = {
      tail,
      members,
      stop() {
        stopped = true;
        clearInterval(timer);
        unsubscribe();
      },
    };
    tails.set(appId, entry);
    // A tail that could not start is dropped: its members fail (clients reconnect with their
    // cursor) and the next connection starts a fresh one.
    tail.ready.catch((err) => {
      logger.warn({ err, appId }, 'stream tail start failed');
      entry.stop();
      if (tails.get(appId) === entry) tails.delete(appId);
    });
    return entry;
  };

  return {
    stats,
    read: readAt,
    join(appId, member) {
      let entry = tails.get(appId);
      if (!entry) entry = start(appId);
      entry.members.add(member);
      const e = entry;
      return {
        tail: e.tail,
        leave() {
          e.members.delete(member);
          if (e.members.size === 0 && tails.get(appId) === e) {
            e.stop();
            tails.delete(appId);
          }
        },
      };
    },
    size: () => tails.size,
    close() {
      for (const e of tails.values()) e.stop();
      tails.clear();
    },
  };
}

import type { Sql } from '../db.js';
import { headSeq, listEvents, type EventRecord } from '../ledger/read.js';
import { UserScope } from '../identity/user-scope.js';
import { compileStreamFilter, sqlPrefilter, type StreamFilter } from './filter.js';
import { TailEvent, type TailMember, type TailRegistry } from './tail.js';

/** Where a stream starts: strictly after a position, with a recent backfill, or live. */
export type StreamStart = { afterSeq: number } | { backfill: number } | { live: true };

/** The transport a reader writes to (an SSE response, a GraphQL subscription's iterator). */
export interface StreamSink {
  /** Catch-up delivery; resolves when the transport can take more (flow control). */
  send(event: TailEvent): Promise<void>;
  /** Live delivery from the tail; synchronous, and a sink that falls too far behind disconnects itself. */
  push(event: TailEvent): void;
  /** End of a tail batch: write out what `push` took. */
  flush?(): void;
  readonly closed: boolean;
}

export interface Reader {
  /** Leaves the tail; idempotent. */
  close(): void;
}

const PAGE = 500;
/** A backfill looks at most this many recent events for matches, so a rare filter costs a bounded scan. */
const BACKFILL_SCAN_MAX = 5000;

/**
 * Runs one stream's reading: catch up by cursor queries from its start, then join the
 * application's tail. Exactly once and in order across the hand-over because a member's
 * position means "everything at or below has been considered": catch-up advances it, the
 * tail only delivers above it, and the hand-over happens in one synchronous step when the
 * tail has read nothing beyond it. Resolves once live (or the sink closed); rejects on a
 * read failure, after which the caller ends the stream and the client resumes by cursor.
 */
export async function startReader(
  sql: Sql,
  tails: TailRegistry,
  appId: string,
  filter: StreamFilter,
  start: StreamStart,
  sink: StreamSink,
): Promise<Reader> {
  const matches = compileStreamFilter(filter, filter.userId !== undefined ? await UserScope.resolve(sql, appId, filter.userId) : undefined);
  const member: TailMember = { pos: 0, live: false, matches, push: (e) => sink.push(e), flush: sink.flush && (() => sink.flush!()) };
  const { tail, leave } = tails.join(appId, member);
  const reader: Reader = { close: leave };
  try {
    await tail.ready;
    if ('live' in start) {
      member.pos = tail.pos;
      member.live = true;
      return reader;
    }
    if ('afterSeq' in start) member.pos = start.afterSeq;
    else member.pos = await backfill(tails, appId, filter, matches, start.backfill, sink);

    const narrowed = sqlPrefilter(filter);
    while (!sink.closed) {
      if (tail.pos <= member.pos) {
        member.live = true;
        break;
      }
      // Everything up to the head read here is committed and visible to the query that follows
      // (the ledger hands out positions in commit order), so a page short of the limit means
      // every match up to `head` has been seen — even when the filter matched none of them.
      // Both are read where the tail's position is visible (a replica may not have replayed
      // it yet), or catch-up would never reach the tail.
      const after = member.pos;
      const { head, rows } = await tails.read(appId, tail.pos, async (sql) => ({
        head: await headSeq(sql, appId),
        rows: await listEvents(sql, appId, { ...narrowed, afterSeq: after }, PAGE),
      }));
      for (const row of rows) {
        if (sink.closed) break;
        if (matches(row)) await sink.send(new TailEvent(row));
        member.pos = row.seq;
      }
      if (rows.length < PAGE && !sink.closed) member.pos = Math.max(member.pos, head);
    }
    return reader;
  } catch (err) {
    leave();
    throw err;
  }
}

/**
 * Sends up to `n` of the most recent matching events (oldest first) and returns the position
 * they were taken at, from which catch-up continues.
 */
async function backfill(
  tails: TailRegistry,
  appId: string,
  filter: StreamFilter,
  matches: (e: EventRecord) => boolean,
  n: number,
  sink: StreamSink,
): Promise<number> {
  // The head and the events below it from one server, so none below the head is missed.
  const { head, found } = await tails.read(appId, 0, async (sql) => {
    const head = await headSeq(sql, appId);
    const found: EventRecord[] = [];
    if (n <= 0) return { head, found };
    const narrowed = sqlPrefilter(filter);
    let before = head + 1;
    let scanned = 0;
    const page = Math.min(PAGE, Math.max(n, 100));
    while (found.length < n && scanned < BACKFILL_SCAN_MAX) {
      const rows = await listEvents(sql, appId, { ...narrowed, beforeSeq: before, descending: true }, page);
      for (const row of rows) {
        if (matches(row)) found.push(row);
        if (found.length === n) break;
      }
      if (rows.length < page) break;
      before = rows.at(-1)!.seq;
      scanned += rows.length;
    }
    return { head, found };
  });
  for (const row of found.reverse()) {
    if (sink.closed) break;
    await sink.send(new TailEvent(row));
  }
  return head;
}

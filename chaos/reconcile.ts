/**
 * The reconciliation: what clients were told, set against the ledger, the streams and the
 * receivers. Pure functions over plain data, so the arithmetic is tested on its own.
 */

/** One row of the chaos table. `null` = this scenario did not exercise that part. */
export interface Row {
  scenario: string;
  /** Logical writes the service acknowledged (events: 201/202; sends: 201/202; inbound: 2xx). */
  acknowledged: number;
  /** Ledger rows of the scenario's application. */
  committed: number;
  /** Acknowledged writes missing from the ledger after the drain. */
  lost: number;
  /** Of those, the ones acknowledged as queued (a 202, an inbound 200): jobs Redis alone held when the client heard of them. */
  queuedLost: number;
  /** Extra ledger rows for one logical write. */
  duplicated: number;
  /** Ledger events a stream reader did not get at their place in ledger order. */
  streamGaps: number | null;
  /** Events a stream reader got more than once. */
  streamDuplicates: number | null;
  webhooksDelivered: number | null;
  webhooksExpected: number | null;
  /**
   * Webhook deliveries the receiver got beyond one per event. Not a broken promise (delivery is
   * at least once: a retry after a 5xx, a crash between the answer and its write), so not a
   * failure: shown to see what a fault costs receivers.
   */
  webhooksRepeated: number | null;
  /** Messages the platform fake received more than once. */
  sendsDoubled: number | null;
  /** Seconds from the end of the fault until requests answered 2xx again; null where not measured. */
  recoverySeconds: number | null;
  /** Seconds from the fault until every queue the load uses had completed a job created after it; null where not measured. */
  queuesBackSeconds: number | null;
  /** Seconds from the fault until the first 201 to a request sent after it; null where not measured. */
  firstCreatedSeconds: number | null;
  /** Responses that broke the contract: 500s and requests that hung. Not a table column; fails the run. */
  faults: string[];
}

export interface LedgerRow {
  id: string;
  /** The client's key for the logical write, when it has one. */
  key?: string;
}

/** Lost and duplicated, from acknowledged keys → ids and the ledger in order. */
export function reconcileWrites(acked: Map<string, string>, ledger: LedgerRow[]): { lost: number; duplicated: number; lostKeys: string[] } {
  const ids = new Set(ledger.map((r) => r.id));
  const perKey = new Map<string, number>();
  for (const r of ledger) if (r.key !== undefined) perKey.set(r.key, (perKey.get(r.key) ?? 0) + 1);
  const lostKeys = [...acked].filter(([key, id]) => !ids.has(id) && !perKey.has(key)).map(([key]) => key);
  let duplicated = 0;
  for (const n of perKey.values()) duplicated += n - 1;
  return { lost: lostKeys.length, duplicated, lostKeys };
}

/**
 * Gaps and duplicates of one reader against the ledger (ids in ledger order), counted from
 * the reader's first event. A gap is a ledger event the reader never got, or got after a
 * later one (out of order): either way a resume from its cursor would have skipped it.
 */
export function reconcileStream(ledgerOrder: string[], received: string[]): { gaps: number; duplicates: number } {
  const position = new Map(ledgerOrder.map((id, i) => [id, i]));
  const seen = new Set<string>();
  let duplicates = 0;
  let gaps = 0;
  let last = -1;
  for (const id of received) {
    if (seen.has(id)) {
      duplicates++;
      continue;
    }
    seen.add(id);
    const p = position.get(id);
    if (p === undefined) continue; // another application's event would be a leak, counted elsewhere
    if (p < last) gaps++;
    else last = p;
  }
  const first = received.length ? (position.get(received[0]) ?? 0) : 0;
  for (const id of ledgerOrder.slice(first)) if (!seen.has(id)) gaps++;
  return { gaps, duplicates };
}

/** True when the row shows a broken promise: the run exits non-zero. */
export function failed(row: Row): boolean {
  return (
    row.lost > 0 ||
    row.queuedLost > 0 ||
    row.duplicated > 0 ||
    (row.streamGaps ?? 0) > 0 ||
    (row.streamDuplicates ?? 0) > 0 ||
    (row.webhooksExpected !== null && row.webhooksDelivered !== row.webhooksExpected) ||
    (row.sendsDoubled ?? 0) > 0 ||
    row.faults.length > 0
  );
}

const seconds = (s: number | null) => (s === null ? '-' : s.toFixed(1));

const COLUMNS: [string, (r: Row) => string][] = [
  ['scenario', (r) => r.scenario],
  ['requests acknowledged', (r) => String(r.acknowledged)],
  ['events committed', (r) => String(r.committed)],
  ['lost', (r) => String(r.lost)],
  ['202/inbound acks lost', (r) => String(r.queuedLost)],
  ['duplicated', (r) => String(r.duplicated)],
  ['stream gaps', (r) => (r.streamGaps === null ? '-' : String(r.streamGaps))],
  ['stream duplicates', (r) => (r.streamDuplicates === null ? '-' : String(r.streamDuplicates))],
  ['webhooks delivered/expected', (r) => (r.webhooksExpected === null ? '-' : `${r.webhooksDelivered}/${r.webhooksExpected}`)],
  ['webhooks repeated', (r) => (r.webhooksRepeated === null ? '-' : String(r.webhooksRepeated))],
  ['sends doubled', (r) => (r.sendsDoubled === null ? '-' : String(r.sendsDoubled))],
  ['recovery (s)', (r) => seconds(r.recoverySeconds)],
  ['queues back (s)', (r) => seconds(r.queuesBackSeconds)],
  ['first 201 (s)', (r) => seconds(r.firstCreatedSeconds)],
  ['result', (r) => (failed(r) ? 'FAIL' : 'ok')],
];

/** The one table the harness prints (a Markdown table, readable in a terminal and in docs). */
export function formatTable(rows: Row[]): string {
  const cells = [COLUMNS.map(([h]) => h), ...rows.map((r) => COLUMNS.map(([, f]) => f(r)))];
  const widths = COLUMNS.map((_, i) => Math.max(...cells.map((c) => c[i].length)));
  const line = (c: string[]) => `| ${c.map((v, i) => v.padEnd(widths[i])).join(' | ')} |`;
  return [line(cells[0]), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...cells.slice(1).map(line)].join('\n');
}

/** The totals row. */
export function total(rows: Row[]): Row {
  const sum = (f: (r: Row) => number | null) => {
    const vals = rows.map(f).filter((v): v is number => v !== null);
    return vals.length ? vals.reduce((a, b) => a + b, 0) : null;
  };
  return {
    scenario: 'total',
    acknowledged: sum((r) => r.acknowledged) ?? 0,
    committed: sum((r) => r.committed) ?? 0,
    lost: sum((r) => r.lost) ?? 0,
    queuedLost: sum((r) => r.queuedLost) ?? 0,
    duplicated: sum((r) => r.duplicated) ?? 0,
    streamGaps: sum((r) => r.streamGaps),
    streamDuplicates: sum((r) => r.streamDuplicates),
    webhooksDelivered: sum((r) => r.webhooksDelivered),
    webhooksExpected: sum((r) => r.webhooksExpected),
    webhooksRepeated: sum((r) => r.webhooksRepeated),
    sendsDoubled: sum((r) => r.sendsDoubled),
    // The slowest recovery, not a sum: each scenario's stands alone.
    recoverySeconds: slowest(rows, (r) => r.recoverySeconds),
    queuesBackSeconds: slowest(rows, (r) => r.queuesBackSeconds),
    firstCreatedSeconds: slowest(rows, (r) => r.firstCreatedSeconds),
    faults: rows.flatMap((r) => r.faults),
  };
}

const slowest = (rows: Row[], f: (r: Row) => number | null) =>
  rows.some((r) => f(r) !== null) ? Math.max(...rows.map((r) => f(r) ?? 0)) : null;

/** What a broker queue holds against what the ledger says it should: by delivery id, the consumer's de-duplication key. */
export interface BrokerQueueCount {
  /** Ledger events the broker subscription should have delivered. */
  expected: number;
  /** Distinct delivery ids in the queue. */
  unique: number;
  /** Expected events with no message in the queue. */
  missing: number;
  /** Messages beyond the first of their delivery id (a publish repeated after a lost confirm). */
  duplicates: number;
  /** The delivery ids with more than one message, and how many each. */
  copies: Map<string, number>;
}

/** Counts `messages` (each a delivery id and the event it carries) against the events `expected` in the ledger. */
export function reconcileBrokerQueue(expected: string[], messages: { deliveryId: string; eventId: string }[]): BrokerQueueCount {
  const deliveries = new Set(messages.map((m) => m.deliveryId));
  const events = new Set(messages.map((m) => m.eventId));
  const copies = new Map<string, number>();
  for (const m of messages) copies.set(m.deliveryId, (copies.get(m.deliveryId) ?? 0) + 1);
  for (const [id, n] of copies) if (n === 1) copies.delete(id);
  return {
    expected: expected.length,
    unique: deliveries.size,
    missing: expected.filter((id) => !events.has(id)).length,
    duplicates: messages.length - deliveries.size,
    copies,
  };
}

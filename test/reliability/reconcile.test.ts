import { describe, expect, it } from 'vitest';
import { failed, formatTable, reconcileBrokerQueue, reconcileStream, reconcileWrites, total, type Row } from '../../chaos/reconcile.js';

const row = (over: Partial<Row> = {}): Row => ({
  scenario: 's',
  acknowledged: 3,
  committed: 3,
  lost: 0,
  queuedLost: 0,
  duplicated: 0,
  streamGaps: 0,
  streamDuplicates: 0,
  webhooksDelivered: null,
  webhooksExpected: null,
  webhooksRepeated: null,
  sendsDoubled: null,
  recoverySeconds: null,
  queuesBackSeconds: null,
  firstCreatedSeconds: null,
  faults: [],
  ...over,
});

describe('chaos reconciliation', () => {
  it('counts an acknowledged write missing from the ledger as lost, and a second row for one key as duplicated', () => {
    const acked = new Map([
      ['k1', 'id1'],
      ['k2', 'id2'],
      ['k3', 'id3'],
    ]);
    expect(
      reconcileWrites(acked, [
        { id: 'id1', key: 'k1' },
        { id: 'id3', key: 'k3' },
        { id: 'idx', key: 'k3' },
      ]),
    ).toEqual({ lost: 1, duplicated: 1, lostKeys: ['k2'] });
    // Committed although its acknowledgement never reached the client: neither lost nor doubled.
    expect(
      reconcileWrites(acked, [
        { id: 'id1', key: 'k1' },
        { id: 'id2', key: 'k2' },
        { id: 'id3', key: 'k3' },
        { id: 'id4', key: 'k4' },
      ]),
    ).toMatchObject({ lost: 0, duplicated: 0 });
  });

  it('counts skipped, out-of-order and repeated events of a reader', () => {
    const ledger = ['a', 'b', 'c', 'd', 'e'];
    expect(reconcileStream(ledger, ['a', 'b', 'c', 'd', 'e'])).toEqual({ gaps: 0, duplicates: 0 });
    expect(reconcileStream(ledger, ['a', 'c', 'd', 'e'])).toEqual({ gaps: 1, duplicates: 0 });
    expect(reconcileStream(ledger, ['a', 'c', 'b', 'd', 'e'])).toEqual({ gaps: 1, duplicates: 0 });
    expect(reconcileStream(ledger, ['a', 'b', 'b', 'c', 'd', 'e', 'e'])).toEqual({ gaps: 0, duplicates: 2 });
    // A reader that joined late is judged from its first event on.
    expect(reconcileStream(ledger, ['c', 'd', 'e'])).toEqual({ gaps: 0, duplicates: 0 });
    expect(reconcileStream(ledger, ['c', 'e'])).toEqual({ gaps: 1, duplicates: 0 });
  });

  it('fails a row on any loss, duplicate, gap, missing webhook, doubled send or contract fault', () => {
    expect(failed(row())).toBe(false);
    for (const bad of [
      { lost: 1 },
      { queuedLost: 1 },
      { duplicated: 1 },
      { streamGaps: 1 },
      { streamDuplicates: 1 },
      { webhooksDelivered: 2, webhooksExpected: 3 },
      { sendsDoubled: 1 },
      { faults: ['500'] },
    ]) {
      expect(failed(row(bad))).toBe(true);
    }
    // At least once: a repeated webhook is shown, never a failure.
    expect(failed(row({ webhooksRepeated: 3 }))).toBe(false);
  });

  it('prints the columns the issue names, with totals', () => {
    const table = formatTable([
      row({ scenario: 'a' }),
      row({ scenario: 'b', lost: 2 }),
      total([row({ scenario: 'a' }), row({ scenario: 'b', lost: 2 })]),
    ]);
    const header = table
      .split('\n')[0]
      .split('|')
      .map((c) => c.trim())
      .filter(Boolean);
    expect(header).toEqual([
      'scenario',
      'requests acknowledged',
      'events committed',
      'lost',
      '202/inbound acks lost',
      'duplicated',
      'stream gaps',
      'stream duplicates',
      'webhooks delivered/expected',
      'webhooks repeated',
      'sends doubled',
      'recovery (s)',
      'queues back (s)',
      'first 201 (s)',
      'result',
    ]);
    expect(table).toMatch(/\| total +\| 6 +\| 6 +\| 2 +\| 0 /);
    expect(table).toMatch(/\| b .*\| FAIL +\|/);
  });

  it('shows a recovery time where a scenario measured one, and the slowest in the totals', () => {
    const rows = [row({ scenario: 'a' }), row({ scenario: 'b', recoverySeconds: 0.84 }), row({ scenario: 'c', recoverySeconds: 2.5 })];
    const table = formatTable([...rows, total(rows)]);
    expect(table).toMatch(/\| a .*\| - +\| - +\| - +\| ok +\|/);
    expect(table).toMatch(/\| b .*\| 0\.8 +\| - +\| - +\| ok +\|/);
    expect(table).toMatch(/\| total .*\| 2\.5 +\| - +\| - +\| ok +\|/);
  });

  it('shows how long a failover kept the queues and the 201s away, the slowest in the totals', () => {
    const rows = [
      row({ scenario: 'a', queuesBackSeconds: 4.26, firstCreatedSeconds: 3.9 }),
      row({ scenario: 'b', queuesBackSeconds: 0.2, firstCreatedSeconds: 6.04 }),
    ];
    const table = formatTable([...rows, total(rows)]);
    expect(table).toMatch(/\| a .*\| - +\| 4\.3 +\| 3\.9 +\| ok +\|/);
    expect(table).toMatch(/\| total .*\| - +\| 4\.3 +\| 6\.0 +\| ok +\|/);
  });

  it('counts a broker queue by delivery id: unique, missing events, and every copy past the first as a duplicate', () => {
    const messages = [
      { deliveryId: 'd1', eventId: 'e1' },
      { deliveryId: 'd2', eventId: 'e2' },
      { deliveryId: 'd2', eventId: 'e2' },
      { deliveryId: 'd2', eventId: 'e2' },
    ];
    expect(reconcileBrokerQueue(['e1', 'e2', 'e3'], messages)).toEqual({
      expected: 3,
      unique: 2,
      missing: 1,
      duplicates: 2,
      copies: new Map([['d2', 3]]),
    });
    expect(reconcileBrokerQueue([], [])).toEqual({ expected: 0, unique: 0, missing: 0, duplicates: 0, copies: new Map() });
  });
});

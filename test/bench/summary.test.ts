import { describe, expect, it } from 'vitest';
import { renderSummary, summaryRows, target, type BenchResult } from '../../bench/lib.js';

const result = (over: Partial<BenchResult>): BenchResult => ({
  name: 'ingest',
  date: '2026-11-23T12:00:00.000Z',
  commit: 'abc1234',
  machine: { cpus: 2, memory_gb: 24, load_1m_start: 3.1, load_1m_end: 4.2 },
  figures: {},
  baselines: {},
  ratios: {},
  targets: {},
  ...over,
});

describe('bench summary table', () => {
  it('pairs each figure with the baseline its ratio names, and carries figure and ratio targets', () => {
    const rows = summaryRows(
      result({
        figures: { committed_per_s: 800, post_p99_ms: 120 },
        baselines: { http_201_per_s: 8000, insert_rows_per_s: 20000 },
        ratios: { committed_per_s_vs_http_201_per_s: 0.1, committed_per_s_vs_insert_rows_per_s: 0.04 },
        targets: { committed_per_s_vs_http_201_per_s: target(0.1, '>=', 0.5), post_p99_ms: target(120, '<', 50) },
      }),
    );
    expect(rows).toEqual([
      {
        figure: 'committed_per_s',
        value: 800,
        baseline: { name: 'http_201_per_s', value: 8000 },
        ratio: 0.1,
        targets: ['ratio >= 0.5'],
        met: [false],
      },
      { figure: 'committed_per_s', value: 800, baseline: { name: 'insert_rows_per_s', value: 20000 }, ratio: 0.04, targets: [], met: [] },
      { figure: 'post_p99_ms', value: 120, targets: ['< 50'], met: [false] },
    ]);
  });

  it('keeps a ratio that names no figure as its own row', () => {
    const rows = summaryRows(
      result({ figures: { a_per_s: 1 }, baselines: { b_per_s: 2, c_per_s: 4 }, ratios: { b_per_s_vs_c_per_s: 0.5 } }),
    );
    expect(rows.map((r) => [r.figure, r.value, r.baseline?.name, r.ratio])).toEqual([
      ['a_per_s', 1, undefined, undefined],
      ['b_per_s_vs_c_per_s', 2, 'c_per_s', 0.5],
    ]);
  });

  it('renders one table, capability benches first, with date, commit, machine and load on each bench', () => {
    const table = renderSummary([
      result({ name: 'scale', figures: { x: 1 } }),
      result({ name: 'webhooks', figures: { y: 2 } }),
      result({ name: 'ingest', figures: { z: 3 }, targets: { z: target(3, '<', 1) } }),
    ]);
    const lines = table.split('\n');
    expect(lines).toHaveLength(5);
    expect(lines.slice(2).map((l) => l.split('|')[1].trim())).toEqual(['**ingest**', '**webhooks**', '**scale**']);
    expect(lines[2]).toContain('| z | 3 |');
    expect(lines[2]).toContain('**NOT met**');
    expect(lines[2]).toContain('2026-11-23 12:00 UTC, `abc1234`, 2 CPUs 24 GB, load 3.1→4.2');
  });
});

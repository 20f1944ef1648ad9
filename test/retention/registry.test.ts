import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { projectRoot } from '../../src/project-root.js';
import { MAINTENANCE_TASKS } from '../../src/queues.js';
import { RETENTION, type Retention } from '../../src/retention/registry.js';
import { TEMPLATE_DB, dbUrl } from '../helpers/db.js';

const entries = Object.entries(RETENTION) as [string, Retention][];
const read = (file: string) => readFileSync(join(projectRoot(), file), 'utf8');

describe('the retention registry', () => {
  it('names every table the migrations create, and no other', async () => {
    // The migrated template: what every deployment's release step builds.
    const sql = postgres(dbUrl(TEMPLATE_DB), { max: 1, onnotice: () => {} });
    try {
      const tables = await sql<{ name: string }[]>`
        SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname <> 'pgmigrations'`;
      expect(tables.map((t) => t.name).sort(), 'add the new table to src/retention/registry.ts').toEqual(Object.keys(RETENTION).sort());
    } finally {
      await sql.end();
    }
  });

  it('gives every pruned table a configuration variable with a default, listed in the README and docs/OPERATIONS.md', () => {
    const defaults = parseConfig({});
    const readme = read('README.md');
    const operations = read('docs/OPERATIONS.md');
    for (const [table, r] of entries) {
      if (r.kind === 'kept') continue;
      expect(defaults[r.variable], `${table}: ${r.variable}`).toBeTypeOf('number');
      expect(readme, `${r.variable} in README's configuration table`).toMatch(new RegExp(`^\\| \`${r.variable}\` \\|`, 'm'));
      expect(operations, `${table} in docs/OPERATIONS.md's retention table`).toMatch(
        new RegExp(`^\\|[^|]*\`${table}\`[^|]*\\|.*\`${r.variable}\``, 'm'),
      );
    }
  });

  it('says why a table is kept, and runs every maintenance task for some table', () => {
    for (const [table, r] of entries) if (r.kind === 'kept') expect(r.because.length, table).toBeGreaterThan(10);
    const used = new Set(entries.flatMap(([, r]) => (r.kind !== 'kept' && r.by.queue === 'maintenance' ? [r.by.task] : [])));
    expect([...used].sort()).toEqual([...MAINTENANCE_TASKS].sort());
  });
});

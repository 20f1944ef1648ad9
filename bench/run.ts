/**
 * `npm run bench -- [name…] [--duration S] [--clients N] [--list] [--render]`
 *
 * Runs bench/<name>.ts (every bench when no name is given), writes bench/results/<name>.json
 * and regenerates bench/README.md's results: one summary table of every bench's figures beside
 * their same-run baselines, then each bench's detail. A bench is any bench/*.ts file
 * other than lib.ts and run.ts whose default export is a `Bench` (see lib.ts): adding a
 * file is all it takes to plug one in.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { projectRoot } from '../src/project-root.js';
import { currentCommit, formatTable, loadAverage, machine, renderReadme, writeResult, type Bench, type BenchOptions } from './lib.js';

const NOT_BENCHES = new Set(['lib', 'run']);

function availableBenches(): string[] {
  return readdirSync(join(projectRoot(), 'bench'))
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => f.slice(0, -3))
    .filter((n) => !NOT_BENCHES.has(n))
    .sort();
}

async function load(name: string): Promise<Bench> {
  const mod = (await import(pathToFileURL(join(projectRoot(), 'bench', `${name}.ts`)).href)) as { default?: Bench };
  if (!mod.default || typeof mod.default.run !== 'function') throw new Error(`bench/${name}.ts has no default export of the Bench shape`);
  return mod.default;
}

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  options: { duration: { type: 'string' }, clients: { type: 'string' }, list: { type: 'boolean' }, render: { type: 'boolean' } },
  allowPositionals: true,
});
const available = availableBenches();
if (values.list) {
  for (const name of available) process.stdout.write(`${name}: ${(await load(name)).description}\n`);
  process.exit(0);
}
if (values.render) {
  // Only rewrites bench/README.md from the result files already there (after a merge, say).
  renderReadme();
  process.exit(0);
}
const unknown = positionals.filter((n) => !available.includes(n));
if (unknown.length) {
  process.stderr.write(`unknown bench ${unknown.join(', ')}; available: ${available.join(', ')}\n`);
  process.exit(2);
}
const options: BenchOptions = {
  ...(values.duration ? { durationS: Number(values.duration) } : {}),
  ...(values.clients ? { clients: Number(values.clients) } : {}),
};
for (const [k, v] of Object.entries(options)) {
  if (!Number.isFinite(v) || v <= 0) {
    process.stderr.write(`--${k === 'durationS' ? 'duration' : k} must be a positive number\n`);
    process.exit(2);
  }
}

let failed = false;
const runStarted = new Date().toISOString();
for (const name of positionals.length ? positionals : available) {
  const bench = await load(name);
  const log = (m: string) => process.stdout.write(`[${name}] ${m}\n`);
  log(bench.description);
  try {
    const loadStart = loadAverage();
    const report = await bench.run({ options, log });
    const result = {
      name,
      date: new Date().toISOString(),
      run_started: runStarted,
      commit: currentCommit(),
      machine: { ...machine(), load_1m_start: loadStart, load_1m_end: loadAverage() },
      ...report,
    };
    const file = writeResult(result);
    process.stdout.write(`\n${formatTable(result)}\n\n`);
    if (report.notes?.length) process.stdout.write(`${report.notes.map((n) => `  - ${n}`).join('\n')}\n\n`);
    log(`written to ${file}`);
  } catch (err) {
    failed = true;
    log(`failed: ${err instanceof Error ? err.stack : String(err)}`);
  }
}
renderReadme();
process.exit(failed ? 1 : 0);

import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { projectRoot } from '../../src/project-root.js';
import { FAILOVER_SCENARIOS } from '../../chaos/failover-scenarios.js';
import { SCENARIOS } from '../../chaos/scenarios.js';

/** Runs the harness with `args` in its own process group; resolves with its exit code and output. */
async function runHarness(args: string[]): Promise<{ code: number | null; out: string }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', join(projectRoot(), 'chaos/run.ts'), ...args], {
    cwd: projectRoot(),
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group, with the web and worker processes it starts: a run cut short
    // (timeout) is killed whole instead of leaving them loading the rest of the suite.
    detached: true,
  });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
  onTestFinished(() => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    process.stdout.write(`chaos run cut short; its output so far:\n${out.slice(-20_000)}\n`);
    try {
      process.kill(-proc.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  });
  const code = await new Promise<number | null>((resolve) => proc.on('exit', resolve));
  if (code !== 0) process.stdout.write(out.slice(-20_000));
  return { code, out };
}

const passed = (out: string, scenarios: { name: string; optIn?: boolean }[]) => {
  for (const s of scenarios.filter((s) => !s.optIn)) expect(out).toMatch(new RegExp(`\\| ${s.name} +\\|.*\\| ok +\\|`));
  expect(out).toMatch(/PASS: nothing lost, doubled or skipped/);
};

/**
 * The short variant of `npm run chaos`: every scenario, short phases, real processes, on one
 * Redis and one PostgreSQL, then with `--cluster` on a Redis Cluster and a replicated
 * PostgreSQL (the failover scenarios, chaos/failover-scenarios.ts). Each passes
 * only when the harness's reconciliation finds nothing lost, doubled or skipped, no request
 * answered 500 or hung, no process exited and no job stayed stuck (the harness exits non-zero
 * otherwise). Run with `npm run test:chaos`; CI runs it after `npm test`, which leaves it out
 * (vitest.config.ts).
 */
describe('chaos (short)', () => {
  // Fourteen scenarios of 10–40 s each, plus start-up and drains: 3–5 minutes alone.
  it('loses, doubles and skips nothing through process kills, Redis and PostgreSQL crashes, connection faults, a silent platform and a poisonous neighbour', {
    timeout: 1_200_000,
  }, async () => {
    const { code, out } = await runHarness(['--short']);
    expect(code).toBe(0);
    passed(out, SCENARIOS);
  });

  // A 3 + 3 Redis Cluster and a PostgreSQL primary with a synchronous standby: about a minute.
  it('loses, doubles and skips nothing when a Redis master is killed or failed over, the PostgreSQL primary is killed, or its replica lags', {
    timeout: 900_000,
  }, async () => {
    const { code, out } = await runHarness(['--short', '--cluster']);
    expect(code).toBe(0);
    passed(out, FAILOVER_SCENARIOS);
  });
});

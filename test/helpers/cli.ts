import { execFile } from 'node:child_process';
import { projectRoot } from '../../src/project-root.js';

/** Runs the CLI exactly as an operator does (bounded at 90 s: several at once on a loaded machine take tens of seconds) (`npm run -s cli -- …`) with the test file's environment. */
export function runCli(env: Record<string, string>, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      'npm',
      ['run', '-s', 'cli', '--', ...args],
      { cwd: projectRoot(), env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, timeout: 90_000 },
      (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

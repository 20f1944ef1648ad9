import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { serverProcess, threadStates } from '../helpers/server-process.js';

/**
 * The fault tests' hung server is a private server stopped with SIGSTOP. `kill` returns when the
 * signal is queued, while a thread on another core may still run and answer: a NATS publish sent
 * right after it was once acknowledged in CI ("hung" server, `delivered: true`).
 */
describe('pausing a private server', () => {
  it('resolves only once every thread of the process has stopped, and resume lets them run', async () => {
    const proc = serverProcess();
    // Node runs several threads (V8's platform workers, libuv's pool): like nats-server and beam.
    const child = spawn(process.execPath, ['-e', 'console.log("up"); setInterval(() => {}, 1000)'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const exited = proc.track(child);
    await new Promise((resolve) => child.stdout!.once('data', resolve));
    try {
      for (let i = 0; i < 20; i++) {
        await proc.pause();
        const states = threadStates(child.pid!);
        expect(states.length).toBeGreaterThan(1);
        expect(
          states.every((s) => s === 'T' || s === 't'),
          states.join(''),
        ).toBe(true);
        proc.resume();
      }
    } finally {
      await proc.stop();
      await exited;
    }
  });
});

import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/** The signals a test sends the server process it started (its current one: a restart spawns another). */
export interface ServerProcess {
  /** Makes `child` the current process; resolves once it has exited. */
  track(child: ChildProcess): Promise<void>;
  running(): boolean;
  /** SIGKILL (the default: the machine lost) or SIGTERM; resolves once it has exited. A paused process is woken first, so SIGTERM reaches it. */
  stop(signal?: 'SIGKILL' | 'SIGTERM'): Promise<void>;
  /**
   * SIGSTOP: the server keeps its sockets open and answers nothing (a hung server); `resume` is SIGCONT.
   * Resolves once every thread of it has stopped: `kill` returns when the signal is queued, and a
   * thread still running on another core may yet answer what a test sends next.
   */
  pause(): Promise<void>;
  resume(): void;
  /** SIGKILL now, without waiting for the exit (for an exiting process, which cannot wait). */
  kill(): void;
}

export function serverProcess(): ServerProcess {
  let proc: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const running = () => proc !== undefined && proc.exitCode === null && proc.signalCode === null;
  return {
    track(child) {
      proc = child;
      exited = new Promise((resolve) => child.once('exit', () => resolve()));
      return exited;
    },
    running,
    async stop(signal = 'SIGKILL') {
      if (!running()) return;
      proc!.kill('SIGCONT');
      proc!.kill(signal);
      await exited;
    },
    async pause() {
      if (!running()) return;
      proc!.kill('SIGSTOP');
      await allStopped(proc!.pid!);
    },
    resume: () => void proc?.kill('SIGCONT'),
    kill: () => void proc?.kill('SIGKILL'),
  };
}

/** A private server a test or the chaos harness started: its signals, its restart and its removal. */
export interface PrivateServer extends Omit<ServerProcess, 'track' | 'kill'> {
  /** Its directory: configuration, certificates and data, kept across restarts. */
  dir: string;
  /** With `tls`: the PEM of the CA that signed its certificate (for 127.0.0.1 and localhost), `ca.pem` in `dir`. */
  caPem?: string;
  /** How long the last start took until it was ready, in ms. */
  lastStartMs: number;
  /** Starts it again on the same ports and directory; resolves once it is ready. */
  start(): Promise<void>;
  /** Stops it and removes its directory. */
  destroy(): Promise<void>;
}

/** The PrivateServer part of a helper's server, around its process and its own `start` (which sets `lastStartMs`). */
export function privateServer(proc: ServerProcess, dir: string, start: () => Promise<void>): PrivateServer {
  const { running, stop, pause, resume } = proc;
  const remove = () => rmSync(dir, { recursive: true, force: true });
  // A test file or harness that exits without its teardown takes its server and directory with it.
  const onExit = () => {
    proc.kill();
    remove();
  };
  process.once('exit', onExit);
  return {
    dir,
    lastStartMs: 0,
    running,
    stop,
    pause,
    resume,
    start,
    async destroy() {
      await stop('SIGKILL');
      process.off('exit', onExit);
      remove();
    },
  };
}

/** The states of a process's threads, from /proc (Linux): `T` is stopped by a signal. */
export function threadStates(pid: number): string[] {
  const dir = `/proc/${pid}/task`;
  const states: string[] = [];
  for (const tid of readdirSync(dir)) {
    try {
      // The state follows the command in parentheses, which may itself hold spaces or parentheses.
      const stat = readFileSync(`${dir}/${tid}/stat`, 'utf8');
      states.push(stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3));
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return states;
}

/** The kernel has no event for "stopped": its state is polled, briefly, with a bound. */
async function allStopped(pid: number, boundMs = 5_000): Promise<void> {
  const deadline = Date.now() + boundMs;
  for (;;) {
    const states = threadStates(pid);
    if (states.length > 0 && states.every((s) => s === 'T' || s === 't')) return;
    if (Date.now() > deadline) throw new Error(`process ${pid} not stopped after ${boundMs} ms (threads: ${states.join('')})`);
    await sleep(2);
  }
}

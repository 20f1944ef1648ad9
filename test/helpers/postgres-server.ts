import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { freePort } from './stack.js';

export interface PostgresServerOptions {
  /** Extra server settings (`-c name=value`), e.g. `{ max_connections: '60' }`. */
  settings?: Record<string, string>;
  /** Directory the data directory is created in. @default the system's temp directory */
  parent?: string;
  /**
   * In a process group of its own, so a terminal's Ctrl-C reaches it only through whoever
   * started it (`npm run dev:cluster` stops the gateway before its servers). @default false
   */
  detached?: boolean;
}

export interface PostgresServer {
  port: number;
  /** `postgres://postgres@127.0.0.1:PORT` — append `/dbname`. */
  base: string;
  dir: string;
  running(): boolean;
  /**
   * Stops the server. `immediate` is a crash (no checkpoint, crash recovery at the next start);
   * `fast` rolls back open transactions and shuts down cleanly. Resolves once it has exited.
   */
  stop(mode?: 'immediate' | 'fast'): Promise<void>;
  /**
   * SIGKILLs the postmaster: the machine lost, nothing shut down. Its backends notice and exit
   * by themselves; the port stops accepting at once. Resolves once the postmaster has exited.
   */
  kill(): Promise<void>;
  /** Starts it again on the same port and data directory; resolves once it accepts queries. */
  start(): Promise<void>;
  /** Stops it and removes its data directory. */
  destroy(): Promise<void>;
}

/** The newest installed PostgreSQL's binaries (Debian's layout). */
export function postgresBin(program: string): string {
  const versions = readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a));
  if (!versions.length) throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql');
  return `/usr/lib/postgresql/${versions[0]}/bin/${program}`;
}

// PostgreSQL refuses to run as root, so as root its programs run as the `postgres` user.
const asRoot = userInfo().uid === 0;

/** `cmd args` as the user PostgreSQL's programs run as. */
export const runAsPostgres = (cmd: string, args: string[]): [string, string[]] =>
  asRoot ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];

/** A new empty directory the PostgreSQL user owns (initdb and pg_basebackup write into it). */
export function postgresDataDir(parent = tmpdir()): string {
  const dir = mkdtempSync(join(parent, 'gw-pg-'));
  if (asRoot) {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres']).toString());
    chownSync(dir, id('-u'), id('-g'));
  }
  return dir;
}

/**
 * A private PostgreSQL server on a free port and its own data directory, so a test or the chaos
 * harness can crash and restart a real server without touching the machine's.
 */
export async function startPostgresServer(options: PostgresServerOptions = {}): Promise<PostgresServer> {
  const dir = postgresDataDir(options.parent);
  const [initCmd, initArgs] = runAsPostgres(postgresBin('initdb'), [
    '-D',
    dir,
    '-U',
    'postgres',
    '--auth=trust',
    '-E',
    'UTF8',
    '--no-sync',
  ]);
  execFileSync(initCmd, initArgs, { stdio: 'pipe' });
  return runPostgres(dir, await freePort(), options.settings, options.detached);
}

/** Runs a postgres server on an existing data directory (from initdb or pg_basebackup). */
export async function runPostgres(
  dir: string,
  port: number,
  extraSettings: Record<string, string> = {},
  detached = false,
): Promise<PostgresServer> {
  const settings = { listen_addresses: '127.0.0.1', port: String(port), unix_socket_directories: dir, fsync: 'on', ...extraSettings };
  let proc: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let out = '';

  const ready = async () => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const probe = postgres(`postgres://postgres@127.0.0.1:${port}/postgres`, { max: 1, connect_timeout: 2, onnotice: () => {} });
      try {
        await probe`SELECT 1`;
        return;
      } catch (err) {
        if (proc?.exitCode !== null && proc?.exitCode !== undefined) throw new Error(`postgres exited at start:\n${out}`);
        if (Date.now() > deadline) throw new Error(`postgres did not accept queries on ${port}: ${(err as Error).message}\n${out}`);
      } finally {
        await probe.end({ timeout: 1 }).catch(() => {});
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  };

  const start = async () => {
    const args = ['-D', dir, ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])];
    const [cmd, full] = runAsPostgres(postgresBin('postgres'), args);
    const child = spawn(cmd, full, { stdio: ['ignore', 'pipe', 'pipe'], detached });
    child.stdout!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-4000)));
    child.stderr!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-4000)));
    proc = child;
    exited = new Promise((resolve) => child.once('exit', () => resolve()));
    await ready();
  };

  // Through runuser, signal the server itself (runuser's child), not the wrapper.
  const postmasterPid = () =>
    asRoot
      ? Number(
          execFileSync('pgrep', ['-P', String(proc!.pid)])
            .toString()
            .trim()
            .split('\n')[0],
        )
      : proc!.pid!;

  const server: PostgresServer = {
    port,
    base: `postgres://postgres@127.0.0.1:${port}`,
    dir,
    running: () => proc !== undefined && proc.exitCode === null && proc.signalCode === null,
    async stop(mode = 'fast') {
      if (!server.running()) return;
      // The postmaster's own signals: SIGQUIT is an immediate shutdown, SIGINT a fast one.
      process.kill(postmasterPid(), mode === 'immediate' ? 'SIGQUIT' : 'SIGINT');
      await exited;
    },
    async kill() {
      if (!server.running()) return;
      process.kill(postmasterPid(), 'SIGKILL');
      await exited;
    },
    start,
    async destroy() {
      await server.stop('immediate').catch(() => proc?.kill('SIGKILL'));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await start();
  return server;
}

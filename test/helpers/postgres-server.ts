import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { freePort } from './stack.js';

export interface PostgresServerOptions {
  /** Extra server settings (`-c name=value`), e.g. `{ max_connections: '60' }`. */
  settings?: Record<string, string>;
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
  /** Starts it again on the same port and data directory; resolves once it accepts queries. */
  start(): Promise<void>;
  /** Stops it and removes its data directory. */
  destroy(): Promise<void>;
}

/** The newest installed PostgreSQL's binaries (Debian's layout). */
function binDir(): string {
  const versions = readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a));
  if (!versions.length) throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql');
  return `/usr/lib/postgresql/${versions[0]}/bin`;
}

/**
 * A private PostgreSQL server on a free port and its own data directory, so a test or the chaos
 * harness can crash and restart a real server without touching the machine's. PostgreSQL
 * refuses to run as root, so as root it runs as the `postgres` user.
 */
export async function startPostgresServer(options: PostgresServerOptions = {}): Promise<PostgresServer> {
  const bin = binDir();
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'gw-pg-'));
  const asRoot = userInfo().uid === 0;
  const runAs = (cmd: string, args: string[]): [string, string[]] =>
    asRoot ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
  if (asRoot) {
    const { uid, gid } = {
      uid: Number(execFileSync('id', ['-u', 'postgres']).toString()),
      gid: Number(execFileSync('id', ['-g', 'postgres']).toString()),
    };
    chownSync(dir, uid, gid);
  }
  const [initCmd, initArgs] = runAs(join(bin, 'initdb'), ['-D', dir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  execFileSync(initCmd, initArgs, { stdio: 'pipe' });

  const settings = { listen_addresses: '127.0.0.1', port: String(port), unix_socket_directories: dir, fsync: 'on', ...options.settings };
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
    const [cmd, full] = runAs(join(bin, 'postgres'), args);
    const child = spawn(cmd, full, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-4000)));
    child.stderr!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-4000)));
    proc = child;
    exited = new Promise((resolve) => child.once('exit', () => resolve()));
    await ready();
  };

  const server: PostgresServer = {
    port,
    base: `postgres://postgres@127.0.0.1:${port}`,
    dir,
    running: () => proc !== undefined && proc.exitCode === null && proc.signalCode === null,
    async stop(mode = 'fast') {
      if (!server.running()) return;
      // The postmaster's own signals: SIGQUIT is an immediate shutdown, SIGINT a fast one.
      // Through runuser, signal the server itself (runuser's child), not the wrapper.
      const pid = asRoot
        ? Number(
            execFileSync('pgrep', ['-P', String(proc!.pid)])
              .toString()
              .trim()
              .split('\n')[0],
          )
        : proc!.pid!;
      process.kill(pid, mode === 'immediate' ? 'SIGQUIT' : 'SIGINT');
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

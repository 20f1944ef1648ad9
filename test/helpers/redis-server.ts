import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './stack.js';

export interface RedisServerOptions {
  /** Extra redis-server arguments, e.g. `['--maxmemory-policy', 'allkeys-lru']`. */
  args?: string[];
  /** Append-only file with fsync on every write, so a restart keeps every acknowledged job. @default false */
  durable?: boolean;
  /** Directory its data directory is created in. @default the system's temp directory */
  parent?: string;
  /**
   * In a process group of its own, so a terminal's Ctrl-C reaches it only through whoever
   * started it (`npm run dev:cluster` stops the gateway before its servers). @default false
   */
  detached?: boolean;
  /**
   * A cluster node: its cluster bus gets a free port of its own (`--cluster-port`). Redis's
   * default, the port + 10000, may be taken by another process, or past 65535 for a port from
   * the upper part of the ephemeral range. @default false
   */
  clusterBus?: boolean;
}

export interface RedisServer {
  port: number;
  url: string;
  /** Data directory (AOF/RDB files); removed by `destroy`. */
  dir: string;
  running(): boolean;
  /** Stops the server: SIGKILL by default (a crash), SIGTERM for a clean shutdown. Resolves once it has exited. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Starts it again on the same port and directory, optionally with other arguments. */
  start(args?: string[]): Promise<void>;
  /** Stops it and removes its directory. */
  destroy(): Promise<void>;
}

/**
 * A private redis-server child process on a free port and its own directory: tests and the
 * chaos harness can stop and restart it without touching the machine's Redis or anyone
 * else's keys.
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  let port = 0;
  let bus: string[] = [];
  const pickPorts = async () => {
    port = await freePort();
    let busPort = options.clusterBus ? await freePort() : undefined;
    while (busPort === port) busPort = await freePort();
    bus = busPort === undefined ? [] : ['--cluster-port', String(busPort)];
  };
  await pickPorts();
  const dir = mkdtempSync(join(options.parent ?? tmpdir(), 'gw-redis-'));
  const base = options.durable ? ['--appendonly', 'yes', '--appendfsync', 'always', '--save', ''] : ['--appendonly', 'no', '--save', ''];
  let proc: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  let currentArgs = options.args ?? [];

  const start = async (args = currentArgs) => {
    currentArgs = args;
    const child = spawn(
      'redis-server',
      ['--port', String(port), ...bus, '--bind', '127.0.0.1', '--dir', dir, '--daemonize', 'no', ...base, ...args],
      { stdio: ['ignore', 'pipe', 'pipe'], detached: options.detached },
    );
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-4000)));
    child.stderr!.on('data', (d: Buffer) => (out = (out + d.toString()).slice(-4000)));
    proc = child;
    exited = new Promise((resolve) => child.once('exit', () => resolve()));
    const deadline = Date.now() + 10_000;
    while (!(await accepts(port))) {
      if (child.exitCode !== null) throw new Error(`redis-server exited at start:\n${out}`);
      if (Date.now() > deadline) throw new Error(`redis-server did not listen on ${port}:\n${out}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  // A port found free can be taken before redis-server binds it (by a node started beside it,
  // or as another connection's local port): start again on other ports, a few times.
  for (let attempt = 1; ; attempt++) {
    try {
      await start();
      break;
    } catch (err) {
      if (attempt === 5 || !String(err).includes('Address already in use')) {
        rmSync(dir, { recursive: true, force: true });
        throw err;
      }
      // A cluster node may have written its identity with the port it could not take.
      rmSync(join(dir, 'nodes.conf'), { force: true });
      await pickPorts();
    }
  }
  const server: RedisServer = {
    port,
    url: `redis://127.0.0.1:${port}/0`,
    dir,
    running: () => proc !== undefined && proc.exitCode === null && proc.signalCode === null,
    async stop(signal = 'SIGKILL') {
      if (!server.running()) return;
      proc!.kill(signal);
      await exited;
    },
    start,
    async destroy() {
      await server.stop('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return server;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection({ port, host: '127.0.0.1' });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

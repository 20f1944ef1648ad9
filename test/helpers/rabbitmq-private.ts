import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './stack.js';

const run = promisify(execFile);

/**
 * The release's own scripts, not /usr/sbin's wrapper: run as root the wrapper switches to the
 * `rabbitmq` user through `su` and a shell, so the process a test holds is not the broker and a
 * SIGKILL or SIGSTOP would miss it. With RUNNING_UNDER_SYSTEMD the script execs the Erlang VM
 * itself, so the child's pid is the broker's.
 */
const BIN = '/usr/lib/rabbitmq/bin';

export interface PrivateRabbitmqOptions {
  /** Also a TLS listener (`amqps://`) with a CA and server certificate made by `openssl` in its directory. @default false */
  tls?: boolean;
  /** Directory its own directory is created in. @default the system's temp directory */
  parent?: string;
}

export interface PrivateRabbitmq {
  nodename: string;
  port: number;
  /** `amqp://guest:guest@127.0.0.1:PORT` (guest may connect from loopback). */
  url: string;
  /** With `tls`: the TLS listener's port and `amqps://guest:guest@127.0.0.1:PORT`. */
  tlsPort?: number;
  tlsUrl?: string;
  /** With `tls`: the PEM of the CA that signed the broker's certificate (for 127.0.0.1 and localhost). */
  caPem?: string;
  dir: string;
  /** How long the last start took until the node had booted, in ms. */
  lastStartMs: number;
  running(): boolean;
  /**
   * SIGKILL (the default: the machine lost) or SIGTERM (a clean shutdown); resolves once the VM
   * has exited. Durable queues and persistent messages are kept in its directory.
   */
  stop(signal?: 'SIGKILL' | 'SIGTERM'): Promise<void>;
  /** SIGSTOP: the broker keeps its sockets open and answers nothing (a hung broker); `resume` is SIGCONT. */
  pause(): void;
  resume(): void;
  /** Starts it again on the same ports, node name and directory; resolves once it has booted. */
  start(): Promise<void>;
  /** `rabbitmqctl <args>` against this node; its stdout. */
  ctl(...args: string[]): Promise<string>;
  /** The client connections the broker has open now. */
  connectionCount(): Promise<number>;
  /** Stops it and removes its directory. */
  destroy(): Promise<void>;
}

/**
 * A private RabbitMQ node (its own node name, ports, data, logs, config and Erlang cookie in a
 * temp directory), so a test or the chaos harness can kill, hang and restart a real broker
 * without touching the machine's. It registers with the machine's epmd like any node; nothing of
 * the shared broker is read or changed. Booting takes several seconds (`lastStartMs`).
 */
export async function startPrivateRabbitmq(options: PrivateRabbitmqOptions = {}): Promise<PrivateRabbitmq> {
  const dir = mkdtempSync(join(options.parent ?? tmpdir(), 'gw-rabbitmq-'));
  const nodename = `gwtest-${randomBytes(4).toString('hex')}@localhost`;
  const ports = new Set<number>();
  while (ports.size < (options.tls ? 3 : 2)) ports.add(await freePort());
  const [port, distPort, tlsPort] = [...ports];
  const cookie = join(dir, '.erlang.cookie');
  writeFileSync(cookie, randomBytes(20).toString('hex'));
  chmodSync(cookie, 0o400);
  const conf = [
    `listeners.tcp.local = 127.0.0.1:${port}`,
    // Quiet in a test's output, kept in its directory for a failure's diagnosis.
    'log.console = false',
    'log.file.level = info',
  ];
  let caPem: string | undefined;
  if (options.tls) {
    caPem = await makeCertificates(dir);
    conf.push(
      `listeners.ssl.local = 127.0.0.1:${tlsPort}`,
      `ssl_options.cacertfile = ${join(dir, 'ca.pem')}`,
      `ssl_options.certfile = ${join(dir, 'server.pem')}`,
      `ssl_options.keyfile = ${join(dir, 'server.key')}`,
      'ssl_options.verify = verify_none',
      'ssl_options.fail_if_no_peer_cert = false',
    );
  }
  writeFileSync(join(dir, 'rabbitmq.conf'), `${conf.join('\n')}\n`);
  writeFileSync(join(dir, 'enabled_plugins'), '[].\n');
  const env = {
    ...process.env,
    HOME: dir,
    RABBITMQ_NODENAME: nodename,
    RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
    RABBITMQ_NODE_PORT: String(port),
    RABBITMQ_DIST_PORT: String(distPort),
    RABBITMQ_MNESIA_BASE: join(dir, 'mnesia'),
    RABBITMQ_LOG_BASE: join(dir, 'log'),
    RABBITMQ_CONFIG_FILE: join(dir, 'rabbitmq.conf'),
    RABBITMQ_ADVANCED_CONFIG_FILE: join(dir, 'advanced.config'),
    RABBITMQ_CONF_ENV_FILE: join(dir, 'rabbitmq-env.conf'),
    RABBITMQ_ENABLED_PLUGINS_FILE: join(dir, 'enabled_plugins'),
    RABBITMQ_PLUGINS_EXPAND_DIR: join(dir, 'plugins-expand'),
    RABBITMQ_FEATURE_FLAGS_FILE: join(dir, 'feature_flags'),
    RABBITMQ_PID_FILE: join(dir, 'rabbitmq.pid'),
    RUNNING_UNDER_SYSTEMD: '1',
    // The distribution port on loopback only.
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS: '-kernel inet_dist_use_interface {127,0,0,1}',
  };
  const ctl = async (...args: string[]) =>
    (await run(join(BIN, 'rabbitmqctl'), ['-q', '-n', nodename, ...args], { env, timeout: 90_000 })).stdout;

  let proc: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const running = () => proc !== undefined && proc.exitCode === null && proc.signalCode === null;

  const start = async () => {
    if (running()) return;
    rmSync(env.RABBITMQ_PID_FILE, { force: true });
    const started = performance.now();
    const child = spawn(join(BIN, 'rabbitmq-server'), [], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const keep = (d: Buffer) => (out = (out + d.toString()).slice(-4000));
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    proc = child;
    exited = new Promise((resolve) => child.once('exit', () => resolve()));
    // `wait` returns once the pid file is written and the node has booted; it fails at once when the VM exits.
    const booted = ctl('wait', env.RABBITMQ_PID_FILE, '--timeout', '90');
    const died = exited.then(() => {
      throw new Error(`rabbitmq-server exited at start (logs in ${dir}/log):\n${out}`);
    });
    try {
      await Promise.race([booted, died]);
    } catch (err) {
      if (running()) child.kill('SIGKILL');
      throw err;
    }
    died.catch(() => {});
    broker.lastStartMs = Math.round(performance.now() - started);
  };

  const broker: PrivateRabbitmq = {
    nodename,
    port,
    url: `amqp://guest:guest@127.0.0.1:${port}`,
    ...(options.tls ? { tlsPort, tlsUrl: `amqps://guest:guest@127.0.0.1:${tlsPort}`, caPem } : {}),
    dir,
    lastStartMs: 0,
    running,
    async stop(signal = 'SIGKILL') {
      if (!running()) return;
      proc!.kill('SIGCONT');
      proc!.kill(signal);
      await exited;
    },
    pause: () => void proc?.kill('SIGSTOP'),
    resume: () => void proc?.kill('SIGCONT'),
    start,
    ctl,
    async connectionCount() {
      const out = await ctl('list_connections', 'pid');
      return out.split('\n').filter((l) => l.trim().startsWith('<')).length;
    },
    async destroy() {
      await broker.stop('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await start();
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return broker;
}

/** A CA and a server certificate it signed, for 127.0.0.1 and localhost; returns the CA's PEM. */
async function makeCertificates(dir: string): Promise<string> {
  const p = (name: string) => join(dir, name);
  const ssl = (...args: string[]) => run('openssl', args, { cwd: dir, timeout: 30_000 });
  await ssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '2',
    '-subj',
    '/CN=gwtest CA',
    '-keyout',
    p('ca.key'),
    '-out',
    p('ca.pem'),
  );
  await ssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=localhost', '-keyout', p('server.key'), '-out', p('server.csr'));
  writeFileSync(p('server.ext'), 'subjectAltName = IP:127.0.0.1, DNS:localhost\nextendedKeyUsage = serverAuth\n');
  await ssl(
    ...['x509', '-req', '-in', p('server.csr'), '-CA', p('ca.pem'), '-CAkey', p('ca.key'), '-CAcreateserial'],
    ...['-days', '2', '-extfile', p('server.ext'), '-out', p('server.pem')],
  );
  return readFileSync(p('ca.pem'), 'utf8');
}

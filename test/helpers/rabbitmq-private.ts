import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { makeCertificates } from './certificates.js';
import { privateServer, serverProcess, type PrivateServer } from './server-process.js';
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

/** Stopped, its durable queues and persistent messages are kept in `dir`. */
export interface PrivateRabbitmq extends PrivateServer {
  nodename: string;
  port: number;
  /** `amqp://guest:guest@127.0.0.1:PORT` (guest may connect from loopback). */
  url: string;
  /** With `tls`: the TLS listener's port and `amqps://guest:guest@127.0.0.1:PORT`. */
  tlsPort?: number;
  tlsUrl?: string;
  /** `rabbitmqctl <args>` against this node; its stdout. */
  ctl(...args: string[]): Promise<string>;
  /** The client connections the broker has open now. */
  connectionCount(): Promise<number>;
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

  const proc = serverProcess();

  const start = async () => {
    if (proc.running()) return;
    rmSync(env.RABBITMQ_PID_FILE, { force: true });
    const started = performance.now();
    const child = spawn(join(BIN, 'rabbitmq-server'), [], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const keep = (d: Buffer) => (out = (out + d.toString()).slice(-4000));
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    const exited = proc.track(child);
    // `wait` returns once the pid file is written and the node has booted; it fails at once when the VM exits.
    const booted = ctl('wait', env.RABBITMQ_PID_FILE, '--timeout', '90');
    const died = exited.then(() => {
      throw new Error(`rabbitmq-server exited at start (logs in ${dir}/log):\n${out}`);
    });
    try {
      await Promise.race([booted, died]);
    } catch (err) {
      if (proc.running()) child.kill('SIGKILL');
      throw err;
    }
    died.catch(() => {});
    base.lastStartMs = Math.round(performance.now() - started);
  };

  const base = privateServer(proc, dir, start);
  const broker: PrivateRabbitmq = Object.assign(base, {
    nodename,
    port,
    url: `amqp://guest:guest@127.0.0.1:${port}`,
    ...(options.tls ? { tlsPort, tlsUrl: `amqps://guest:guest@127.0.0.1:${tlsPort}`, caPem } : {}),
    ctl,
    async connectionCount() {
      const out = await ctl('list_connections', 'pid');
      return out.split('\n').filter((l) => l.trim().startsWith('<')).length;
    },
  });
  try {
    await start();
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return broker;
}

import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeCertificates } from './certificates.js';
import { privateServer, serverProcess, type PrivateServer } from './server-process.js';
import { freePort } from './stack.js';

const BIN = '/usr/sbin/nats-server';

export interface PrivateNatsOptions {
  /** The client port requires TLS (`tls://`), with a CA and server certificate made by `openssl` in its directory. @default false */
  tls?: boolean;
  /** A monitoring endpoint (`/connz`, `/jsz`) on a port of its own. @default false */
  monitor?: boolean;
  /** More server configuration, e.g. an `authorization { … }` block. */
  conf?: string;
  /** Directory its own directory is created in. @default the system's temp directory */
  parent?: string;
}

/** Stopped, its streams are kept in its store (`js/` in `dir`); started again, JetStream recovers them. */
export interface PrivateNats extends PrivateServer {
  port: number;
  /** `nats://127.0.0.1:PORT`, or `tls://127.0.0.1:PORT` with `tls`. */
  url: string;
  /** With `monitor`: `http://127.0.0.1:PORT` of its monitoring endpoint. */
  monitorUrl?: string;
}

/**
 * A private nats-server with JetStream (its own port, configuration and store in a temp
 * directory), so a test or the chaos harness can kill, hang and restart a real server without
 * touching the machine's (4222).
 */
export async function startPrivateNats(options: PrivateNatsOptions = {}): Promise<PrivateNats> {
  const dir = mkdtempSync(join(options.parent ?? tmpdir(), 'gw-nats-'));
  let port = 0;
  let monitorPort = 0;
  const conf = join(dir, 'server.conf');
  const writeConf = () =>
    writeFileSync(
      conf,
      [
        // The store under `dir`, so a restart recovers its streams and nothing is left behind.
        `jetstream { store_dir: "${join(dir, 'js')}" }`,
        options.monitor ? `http: "127.0.0.1:${monitorPort}"` : '',
        options.tls ? `tls { cert_file: "${join(dir, 'server.pem')}", key_file: "${join(dir, 'server.key')}" }` : '',
        options.conf ?? '',
        '',
      ].join('\n'),
    );
  const pickPorts = async () => {
    port = await freePort();
    if (options.monitor) while ((monitorPort = await freePort()) === port);
    writeConf();
  };

  const proc = serverProcess();

  const start = async () => {
    if (proc.running()) return;
    const started = performance.now();
    const child = spawn(BIN, ['-a', '127.0.0.1', '-p', String(port), '-js', '-c', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = proc.track(child);
    let out = '';
    // It logs to stderr; "Server is ready" comes once every listener is up and JetStream has recovered its streams.
    await new Promise<void>((resolve, reject) => {
      child.stderr!.on('data', (d: Buffer) => {
        out = (out + d.toString()).slice(-8000);
        if (out.includes('Server is ready')) resolve();
      });
      void exited.then(() => reject(new Error(`nats-server exited at start:\n${out}`)));
    });
    base.lastStartMs = Math.round(performance.now() - started);
  };

  const base = privateServer(proc, dir, start);

  try {
    if (options.tls) base.caPem = await makeCertificates(dir);
    // A port found free can be taken before nats-server binds it: start again on others, a few times.
    for (let attempt = 1; ; attempt++) {
      await pickPorts();
      try {
        await start();
        break;
      } catch (err) {
        if (attempt === 5 || !/address already in use/i.test(String(err))) throw err;
      }
    }
  } catch (err) {
    await base.destroy();
    throw err;
  }
  return Object.assign(base, {
    port,
    url: `${options.tls ? 'tls' : 'nats'}://127.0.0.1:${port}`,
    ...(options.monitor ? { monitorUrl: `http://127.0.0.1:${monitorPort}` } : {}),
  });
}

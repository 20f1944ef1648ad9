import { execFile } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import postgres from 'postgres';
import { postgresBin, postgresDataDir, runAsPostgres, runPostgres, startPostgresServer, type PostgresServer } from './postgres-server.js';
import { freePort } from './stack.js';

const run = promisify(execFile);

/** The standby's name in pg_stat_replication and synchronous_standby_names. */
const STANDBY_NAME = 'standby1';
const REPLICATION_ROLE = 'replicator';

export interface ReplicatedPostgresOptions {
  /** Directory the two data directories are created in. @default the system's temp directory */
  parent?: string;
  /** Extra settings for both servers. */
  settings?: Record<string, string>;
  /** Each server in a process group of its own (PostgresServerOptions.detached). @default false */
  detached?: boolean;
}

export interface ReplicatedPostgres {
  /** The server started as primary (after a promotion, the old one). */
  primary: PostgresServer;
  /** A synchronous streaming standby of `primary`: every commit waits until it has the WAL. */
  standby: PostgresServer;
  /**
   * A multi-host URL listing the standby first, then the primary, with
   * `target_session_attrs=primary`: a client that finds the primary itself never depends on
   * which one is listed first, and still finds it after a promotion.
   */
  url(database: string): string;
  /** `pg_ctl promote` on the standby, as an orchestrator would; resolves once it accepts writes. */
  promote(): Promise<void>;
  /** Stops both servers and removes their data directories. */
  destroy(): Promise<void>;
}

/**
 * A PostgreSQL primary with one synchronous streaming standby (`pg_basebackup -R`), each a
 * private server on a free port: what a highly available deployment runs, for tests, the
 * chaos harness and `npm run dev:cluster` to fail over for real.
 */
export async function startReplicatedPostgres(options: ReplicatedPostgresOptions = {}): Promise<ReplicatedPostgres> {
  const common = { wal_level: 'replica', max_wal_senders: '10', hot_standby: 'on', synchronous_commit: 'on', ...options.settings };
  const primary = await startPostgresServer({ parent: options.parent, settings: common, detached: options.detached });
  let standby: PostgresServer | undefined;
  const admin = postgres(`${primary.base}/postgres`, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`CREATE ROLE ${REPLICATION_ROLE} WITH REPLICATION LOGIN`);
    appendFileSync(join(primary.dir, 'pg_hba.conf'), `host replication ${REPLICATION_ROLE} 127.0.0.1/32 trust\n`);
    await admin`SELECT pg_reload_conf()`;

    const dir = postgresDataDir(options.parent);
    const [cmd, args] = runAsPostgres(postgresBin('pg_basebackup'), [
      ...['-D', dir, '-h', '127.0.0.1', '-p', String(primary.port), '-U', REPLICATION_ROLE],
      ...['-R', '-X', 'stream', '--checkpoint=fast', '--no-sync'],
    ]);
    await run(cmd, args, { timeout: 60_000 });
    // Its WAL receiver reports `cluster_name` as its name, which the primary then waits for.
    standby = await runPostgres(dir, await freePort(), { ...common, cluster_name: STANDBY_NAME }, options.detached);
    // Named only now (and not passed on the command line, so ALTER SYSTEM applies): named
    // before a standby streams, every commit on the primary would wait for it.
    await admin.unsafe(`ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (${STANDBY_NAME})'`);
    await admin`SELECT pg_reload_conf()`;
    await waitForSyncStandby(admin);
  } catch (err) {
    await standby?.destroy();
    await primary.destroy();
    throw err;
  } finally {
    await admin.end({ timeout: 1 });
  }
  const sb = standby;

  return {
    primary,
    standby: sb,
    url: (database) => `postgres://postgres@127.0.0.1:${sb.port},127.0.0.1:${primary.port}/${database}?target_session_attrs=primary`,
    async promote() {
      const [cmd, args] = runAsPostgres(postgresBin('pg_ctl'), ['promote', '-D', sb.dir, '-w', '-t', '60']);
      await run(cmd, args, { timeout: 70_000 });
    },
    async destroy() {
      await Promise.all([sb.destroy(), primary.destroy()]);
    },
  };
}

/** Waits until the primary reports the standby streaming and synchronous (`pg_stat_replication`). */
async function waitForSyncStandby(sql: postgres.Sql): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const rows = await sql<{ state: string; sync_state: string }[]>`
      SELECT state, sync_state FROM pg_stat_replication WHERE application_name = ${STANDBY_NAME}`;
    if (rows.some((r) => r.state === 'streaming' && r.sync_state === 'sync')) return;
    if (Date.now() > deadline) throw new Error(`the standby is not streaming synchronously: ${JSON.stringify(rows)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * The service as the chaos harness runs it: real processes on loopback (web and worker
 * processes, each its own Node process) on one of two topologies, every server private to the
 * run. `single`: one redis-server configured as production should be and one PostgreSQL
 * server the harness may crash, stop and fill. `ha`: a Redis Cluster of 3 masters + 3
 * replicas (QUEUE_SHARDS=6, REDIS_WAIT_REPLICAS=1) and a PostgreSQL primary with a synchronous
 * streaming standby that is also the read replica — what a highly available deployment runs
 * (docs/SCALING.md). Every fault is applied to these alone: the machine's Redis and PostgreSQL
 * are never touched.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { createApplication } from '../src/apps/applications.js';
import { SCOPES } from '../src/auth/scopes.js';
import type { RedisTarget } from '../src/config.js';
import type { Sql } from '../src/db.js';
import { migrate } from '../src/migrate.js';
import { createLogger } from '../src/logger.js';
import { closeQueues, createQueues, type Queues } from '../src/queues.js';
import { createRedis, type Redis } from '../src/redis.js';
import { startReplicatedPostgres, type ReplicatedPostgres } from '../test/helpers/postgres-replicated.js';
import { startPostgresServer, type PostgresServer } from '../test/helpers/postgres-server.js';
import { startRedisCluster, type RedisCluster } from '../test/helpers/redis-cluster.js';
import { startRedisServer, type RedisServer } from '../test/helpers/redis-server.js';
import { freePort, spawnService, type ChildService } from '../test/helpers/stack.js';

/** Connection slots of the private server: room for 2 + 2 processes' pools, the harness and the slot-filling scenario. */
const MAX_CONNECTIONS = 120;
/** How long a process may take to serve after its start: tsx compiles the sources first, slow on a loaded machine. */
const START_MS = 180_000;
/** The harness's own sessions carry this name, so faults aimed at the gateway's sessions spare them. */
const HARNESS_APP_NAME = 'chaos-harness';

/** Which servers the service runs on: one of each, or the highly available set. */
export type Topology = 'single' | 'ha';

export interface ClusterOptions<T extends Topology = Topology> {
  topology: T;
  webProcesses: number;
  workerProcesses: number;
  /** Extra environment for every service process. */
  env?: Record<string, string>;
  log(message: string): void;
}

export interface AppCredentials {
  appId: string;
  apiKey: string;
  headers: Record<string, string>;
}

interface Slot {
  name: string;
  entry: string;
  port?: number;
  proc?: ChildService;
  /** Full outputs of this slot's earlier (killed) processes. */
  previous: string[];
  /** Set while a scenario's kill is expected. */
  killed?: boolean;
}

/** The one-box topology's servers. */
export interface SingleServers {
  topology: 'single';
  redis: RedisServer;
  /** The private PostgreSQL server: `stop('immediate')` is a crash, `start()` brings it back. */
  postgres: PostgresServer;
}

/**
 * The highly available topology's servers. DATABASE_URL lists the standby first, then the
 * primary, and says nothing of which is which (the service finds the primary, as after a
 * failover); DATABASE_READ_URL names the standby.
 */
export interface HaServers {
  topology: 'ha';
  redisCluster: RedisCluster;
  replicated: ReplicatedPostgres;
}

export type Cluster<S extends SingleServers | HaServers = SingleServers | HaServers> = ClusterBase & S;
export type SingleCluster = Cluster<SingleServers>;
export type HaCluster = Cluster<HaServers>;

interface ClusterBase {
  env: Record<string, string>;
  /** The harness's own pool on the service's database (on the primary, wherever it is). */
  sql: Sql;
  /** The service's queues, for injecting jobs and watching active ones (the harness's own Redis connection). */
  queues: Queues;
  /** That Redis connection, for writing a job's data as a faulty producer would. */
  queueRedis: Redis;
  dbName: string;
  /** Base URLs of the web processes, by slot (a killed one stays in the list). */
  webBases: string[];
  /** Web slots currently running. */
  liveWebBases(): string[];
  createApp(): Promise<AppCredentials>;
  /** SIGKILLs a process: no shutdown hook, no drain — the crash the service must survive. */
  kill(kind: 'web' | 'worker', index: number): Promise<void>;
  /** Starts the slot again (same port for web) and waits until it is serving. */
  restart(kind: 'web' | 'worker', index: number): Promise<void>;
  /** Sends a signal to a running process (SIGSTOP / SIGCONT: a process frozen, then thawed). */
  signal(kind: 'web' | 'worker', index: number, signal: NodeJS.Signals): void;
  /** PostgreSQL backend pids of one process's sessions (matched by their client ports; Linux /proc). */
  backendsOf(kind: 'web' | 'worker', index: number): Promise<number[]>;
  /** Terminates every backend the gateway's processes hold (pg_terminate_backend); returns how many. */
  terminateBackends(): Promise<number>;
  /** Opens sessions until the server refuses more (every slot taken); `release` closes them. */
  fillSlots(): Promise<{ held: number; release(): Promise<void> }>;
  /** Holds an exclusive lock on `table` for `ms`: every statement touching it waits (pool exhaustion). */
  lockTable(table: string, ms: number): Promise<void>;
  /** The tail of every process's output (for diagnosing a failed run). */
  outputs(): string;
  /** Log lines of errors that reached a client as 500 ("unhandled error"), from every process. */
  contractViolations(): string[];
  /** Processes that exited without a scenario killing them (each was restarted). */
  crashes(): string[];
  /** Writes every process's full output to a directory under /tmp; returns it. */
  saveLogs(): string;
  stop(): Promise<void>;
}

/** The servers of a topology, and what reaches them. */
interface Servers {
  servers: SingleServers | HaServers;
  /** The environment that points the service at them. */
  env: Record<string, string>;
  /** Where the harness's own sessions go: the service's database, and `postgres` for server-wide work (both on the primary). */
  dbUrl: string;
  adminUrl: string;
  redisTarget: RedisTarget;
  destroy(): Promise<void>;
}

async function startServers(topology: Topology, dbName: string, log: (m: string) => void): Promise<Servers> {
  const settings = { max_connections: String(MAX_CONNECTIONS) };
  if (topology === 'single') {
    const redis = await startRedisServer({ durable: true, args: ['--maxmemory-policy', 'noeviction'] });
    const pg = await startPostgresServer({ settings }).catch(async (err) => {
      await redis.destroy();
      throw err;
    });
    log(
      `redis-server on port ${redis.port} (appendonly yes, appendfsync always, noeviction), private PostgreSQL on port ${pg.port}, database ${dbName}`,
    );
    return {
      servers: { topology, redis, postgres: pg },
      env: { DATABASE_URL: `${pg.base}/${dbName}`, REDIS_URL: redis.url, REDIS_PREFIX: 'chaos' },
      dbUrl: `${pg.base}/${dbName}`,
      adminUrl: `${pg.base}/postgres`,
      redisTarget: { url: redis.url },
      destroy: async () => void (await Promise.all([pg.destroy(), redis.destroy()])),
    };
  }
  const [redis, pg] = await Promise.allSettled([startRedisCluster(), startReplicatedPostgres({ settings })]);
  if (redis.status === 'rejected' || pg.status === 'rejected') {
    await Promise.allSettled([redis.status === 'fulfilled' && redis.value.destroy(), pg.status === 'fulfilled' && pg.value.destroy()]);
    throw redis.status === 'rejected' ? redis.reason : (pg as PromiseRejectedResult).reason;
  }
  const { standby, primary } = pg.value;
  log(
    `Redis Cluster of 3 masters + 3 replicas on ports ${redis.value.nodes.map((n) => n.port).join(', ')}; PostgreSQL primary on port ${primary.port} with a synchronous standby on ${standby.port} (the read replica), database ${dbName}`,
  );
  return {
    servers: { topology, redisCluster: redis.value, replicated: pg.value },
    env: {
      DATABASE_URL: `postgres://postgres@127.0.0.1:${standby.port},127.0.0.1:${primary.port}/${dbName}`,
      DATABASE_READ_URL: `${standby.base}/${dbName}`,
      REDIS_CLUSTER_NODES: redis.value.seeds,
      REDIS_PREFIX: '{chaos}',
      QUEUE_SHARDS: '6',
      REDIS_WAIT_REPLICAS: '1',
    },
    dbUrl: pg.value.url(dbName),
    adminUrl: pg.value.url('postgres'),
    redisTarget: { clusterNodes: redis.value.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })) },
    destroy: async () => void (await Promise.all([redis.value.destroy(), pg.value.destroy()])),
  };
}

export async function startCluster(o: ClusterOptions<'single'>): Promise<SingleCluster>;
export async function startCluster(o: ClusterOptions<'ha'>): Promise<HaCluster>;
export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const runId = randomBytes(5).toString('hex');
  const dbName = `gw_chaos_${runId}`;
  const logDir = join(tmpdir(), `gw-chaos-${runId}`);
  const started = await startServers(o.topology, dbName, o.log);
  const { dbUrl } = started;
  const harnessDb = (url: string, max: number) =>
    postgres(url, { max, onnotice: () => {}, connect_timeout: 5, connection: { application_name: HARNESS_APP_NAME } });
  const admin = harnessDb(started.adminUrl, 1);
  await migrate(dbUrl);
  const env: Record<string, string> = {
    NODE_ENV: 'production',
    ...started.env,
    LOG_LEVEL: 'info',
    ADMIN_TOKEN: 'chaos-admin-token-0123456789',
    SECRETS_KEY: 'chaos-secrets-key-0123456789abcdef0123456789',
    RATE_LIMIT_PER_MINUTE: '100000000',
    WEBHOOK_TARGET_POLICY: 'any',
    DEMO_APP: 'false',
    SHUTDOWN_TIMEOUT_MS: '3000',
    ...o.env,
  };
  const sql = harnessDb(dbUrl, 4) as unknown as Sql;
  const queueRedis = createRedis(started.redisTarget, 'request');
  const queues = createQueues(
    queueRedis,
    { REDIS_PREFIX: env.REDIS_PREFIX, QUEUE_SHARDS: Number(env.QUEUE_SHARDS ?? 1) },
    createLogger('silent'),
  );

  const slots: Record<'web' | 'worker', Slot[]> = { web: [], worker: [] };
  for (let i = 0; i < o.webProcesses; i++) slots.web.push({ name: `web${i}`, entry: 'src/web.ts', port: await freePort(), previous: [] });
  for (let i = 0; i < o.workerProcesses; i++) slots.worker.push({ name: `worker${i}`, entry: 'workers/index.ts', previous: [] });

  const crashes: string[] = [];
  let stopping = false;
  const launch = async (slot: Slot) => {
    if (slot.proc) slot.previous.push(slot.proc.output());
    const proc = spawnService(slot.entry, { ...env, ...(slot.port ? { PORT: String(slot.port) } : {}) });
    slot.proc = proc;
    slot.killed = false;
    // A process that dies without being killed by a scenario crashed: a fault. Like a process
    // supervisor, the harness starts it again so the run can go on.
    void proc.exited.then((code) => {
      if (slot.killed || stopping || slot.proc !== proc) return;
      const last = proc.output().trim().split('\n').slice(-6).join(' | ');
      crashes.push(`${slot.name} (pid ${proc.proc.pid}) exited by itself with code ${code}: ${last.slice(0, 600)}`);
      o.log(`CRASH ${slot.name} exited with code ${code}; restarting it`);
      launch(slot).catch((err) => crashes.push(`${slot.name} could not be restarted: ${(err as Error).message}`));
    });
    await proc.waitFor(slot.port ? /web listening/ : /workers started/, START_MS);
  };
  const all = () => [...slots.web, ...slots.worker];

  const cluster: Cluster = {
    ...started.servers,
    env,
    sql,
    queues,
    queueRedis,
    dbName,
    webBases: slots.web.map((s) => `http://127.0.0.1:${s.port}`),
    liveWebBases: () =>
      slots.web
        .filter((s) => s.proc && s.proc.proc.exitCode === null && s.proc.proc.signalCode === null)
        .map((s) => `http://127.0.0.1:${s.port}`),
    async createApp() {
      const a = await createApplication(sql, `chaos-${randomBytes(3).toString('hex')}`, [...SCOPES]);
      return { appId: a.appId, apiKey: a.apiKey, headers: { Authorization: `Bearer ${a.apiKey}`, 'X-Service-App-ID': a.appId } };
    },
    async kill(kind, index) {
      const slot = slots[kind][index];
      if (!slot.proc) return;
      slot.killed = true;
      slot.proc.kill('SIGKILL');
      await slot.proc.exited;
      o.log(`kill -9 ${slot.name} (pid ${slot.proc.proc.pid})`);
    },
    async restart(kind, index) {
      const slot = slots[kind][index];
      await launch(slot);
      o.log(`${slot.name} restarted (pid ${slot.proc!.proc.pid})`);
    },
    signal(kind, index, signal) {
      const slot = slots[kind][index];
      slot.proc?.kill(signal);
      o.log(`${signal} ${slot.name} (pid ${slot.proc?.proc.pid})`);
    },
    async backendsOf(kind, index) {
      const pid = slots[kind][index].proc?.proc.pid;
      if (pid === undefined) return [];
      const ports = clientPorts(pid);
      const rows = await sql<{ pid: number }[]>`
        SELECT pid FROM pg_stat_activity WHERE datname = ${dbName} AND client_port = ANY(${ports}::int[])`;
      return rows.map((r) => r.pid);
    },
    async terminateBackends() {
      const [{ n }] = await admin<{ n: number }[]>`
        SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
         WHERE datname = ${dbName} AND application_name <> ${HARNESS_APP_NAME} AND pid <> pg_backend_pid()`;
      return n;
    },
    async fillSlots() {
      const held: postgres.Sql[] = [];
      for (let i = 0; i < MAX_CONNECTIONS; i++) {
        const c = harnessDb(started.adminUrl, 1);
        try {
          await c`SELECT 1`;
          held.push(c);
        } catch {
          await c.end({ timeout: 1 }).catch(() => {});
          break; // 53300 too many clients: every slot is taken
        }
      }
      return { held: held.length, release: async () => void (await Promise.all(held.map((c) => c.end({ timeout: 1 }).catch(() => {})))) };
    },
    async lockTable(table, ms) {
      const c = harnessDb(dbUrl, 1);
      try {
        await c.begin(async (tx) => {
          await tx.unsafe(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
          await tx`SELECT pg_sleep(${ms / 1000})`;
        });
      } finally {
        await c.end({ timeout: 1 }).catch(() => {});
      }
    },
    outputs() {
      return all()
        .map((s) =>
          [
            ...s.previous.map((p, i) => `--- ${s.name} (earlier process ${i + 1})\n${p.slice(-3000)}`),
            `--- ${s.name}\n${s.proc?.output().slice(-3000) ?? ''}`,
          ].join('\n'),
        )
        .join('\n');
    },
    contractViolations() {
      // A 500 is logged as "unhandled error" by the REST error handler; any such line is a bug.
      return all().flatMap((s) =>
        [...s.previous, s.proc?.output() ?? '']
          .flatMap((out) => out.split('\n'))
          .filter((l) => /"msg":"unhandled error"/.test(l))
          .map((l) => `${s.name}: ${l.slice(0, 1500)}`),
      );
    },
    saveLogs() {
      mkdirSync(logDir, { recursive: true });
      for (const s of all())
        writeFileSync(join(logDir, `${s.name}.log`), [...s.previous, s.proc?.output() ?? ''].join('\n--- restarted\n'));
      return logDir;
    },
    crashes: () => [...crashes],
    async stop() {
      stopping = true;
      await Promise.all(
        all().map(async (s) => {
          const p = s.proc;
          if (!p || p.proc.exitCode !== null || p.proc.signalCode !== null) return;
          p.kill('SIGTERM');
          const timer = setTimeout(() => p.kill('SIGKILL'), 10_000);
          await p.exited;
          clearTimeout(timer);
        }),
      );
      await closeQueues(queues);
      queueRedis.disconnect();
      await sql.end({ timeout: 5 }).catch(() => {});
      await admin.end({ timeout: 1 }).catch(() => {});
      await started.destroy();
    },
  };

  try {
    await Promise.all(slots.worker.map(launch));
    await Promise.all(slots.web.map(launch));
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  o.log(`${slots.web.length} web + ${slots.worker.length} worker processes up`);
  return cluster;
}

/** Local TCP ports of a process's sockets: its fds' socket inodes looked up in /proc/net/tcp{,6}. */
function clientPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch {
      // closed while we read the directory
    }
  }
  const ports: number[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && inodes.has(f[9])) ports.push(Number.parseInt(f[1].split(':')[1], 16));
    }
  }
  return ports;
}

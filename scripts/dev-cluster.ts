/**
 * `npm run dev:cluster`: the gateway on the topology a highly available deployment runs — a
 * Redis Cluster of 3 masters + 3 replicas and a PostgreSQL primary with a synchronous
 * streaming standby — all private servers on free ports under one temporary directory.
 * Prints the variables that reach them, then runs the gateway as `npm start` does. Ctrl-C
 * (SIGINT) or SIGTERM stops the gateway, then every server, and removes the directory.
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../src/project-root.js';
import { startReplicatedPostgres, type ReplicatedPostgres } from '../test/helpers/postgres-replicated.js';
import { startRedisCluster, type RedisCluster } from '../test/helpers/redis-cluster.js';
import { freePort } from '../test/helpers/stack.js';

/** One hash tag for every key: each BullMQ queue's keys must share a slot on a cluster. */
const REDIS_PREFIX = '{gw}';
/** How long the gateway gets to drain after SIGTERM before it is killed (ms). */
const GATEWAY_STOP_MS = 15_000;

const say = (line: string) => process.stdout.write(`${line}\n`);

const root = mkdtempSync(join(tmpdir(), 'gw-dev-cluster-'));
// PostgreSQL runs as its own user when this runs as root: it must reach its data directories.
chmodSync(root, 0o755);

let redis: RedisCluster | undefined;
let pg: ReplicatedPostgres | undefined;
let gateway: ReturnType<typeof spawn> | undefined;
let gatewayExited: Promise<number | null> = Promise.resolve(null);
let stopping = false;

async function stopAll(code: number): Promise<never> {
  stopping = true;
  if (gateway && gateway.exitCode === null && gateway.signalCode === null) {
    gateway.kill('SIGTERM');
    const force = setTimeout(() => gateway?.kill('SIGKILL'), GATEWAY_STOP_MS);
    await gatewayExited;
    clearTimeout(force);
  }
  await Promise.allSettled([redis?.destroy(), pg?.destroy()]);
  rmSync(root, { recursive: true, force: true });
  say(`stopped; removed ${root}`);
  process.exit(code);
}

const onSignal = (signal: NodeJS.Signals) => {
  if (stopping) return;
  say(`${signal}: stopping the gateway, then the servers`);
  void stopAll(0);
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

try {
  say(`starting a Redis Cluster (3 masters + 3 replicas) and PostgreSQL (primary + synchronous standby) in ${root}`);
  const [cluster, replicated] = await Promise.all([
    startRedisCluster({ parent: root, detached: true }),
    startReplicatedPostgres({ parent: root, detached: true }),
  ]);
  redis = cluster;
  pg = replicated;
} catch (err) {
  process.stderr.write(`dev:cluster could not start its servers: ${(err as Error).message}\n`);
  await stopAll(1);
}
if (stopping) await new Promise(() => {}); // a signal during start-up: stopAll exits

const env = {
  REDIS_CLUSTER_NODES: redis!.seeds,
  REDIS_PREFIX,
  DATABASE_URL: pg!.url('gateway'),
  PORT: String(await freePort()),
};
say('');
say('Use them with:');
for (const [k, v] of Object.entries(env)) say(`  ${k}=${v}`);
say('');

// Its own process group, like the servers': a Ctrl-C in the terminal reaches it through this
// process only, once, and the servers stay up until it has drained.
gateway = spawn(process.execPath, ['--import', 'tsx', join(projectRoot(), 'src/dev.ts')], {
  cwd: projectRoot(),
  env: { ...process.env, ...env },
  stdio: 'inherit',
  detached: true,
});
const child = gateway;
gatewayExited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
say(`gateway (pid ${child.pid}) starting on http://localhost:${env.PORT}; Ctrl-C stops everything`);
void gatewayExited.then((code) => {
  if (stopping) return;
  say(`the gateway exited (${code}); stopping the servers`);
  void stopAll(code ?? 1);
});

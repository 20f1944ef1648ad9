import { checkRedis } from '../src/startup-checks.js';
import { survivingUnhandledRejections } from '../src/last-resort.js';
import { pathToFileURL } from 'node:url';
import type { QueueName, WorkerQueue } from '../src/config.js';
import { loadConfig } from '../src/config.js';
import { closeDeps, createDeps, type Deps } from '../src/deps.js';
import { startMetricsServer } from '../src/http/metrics-server.js';
import { onShutdownSignal } from '../src/shutdown.js';
import { startTracing } from '../src/tracing/index.js';
import { queueShards, type QueueShard } from '../src/queues.js';
import { allShards, startWorkerHost, type WorkerHost } from './host.js';
import { PROCESSORS } from './registry.js';

/**
 * Starts the processors of the queues named in WORKER_QUEUES: every shard of each, or the
 * shards named (of QUEUE_SHARDS; the shards of QUEUE_SHARDS_PREVIOUS are served whole).
 */
export function startWorkers(deps: Deps, selection: readonly (QueueName | WorkerQueue)[] = deps.config.WORKER_QUEUES): WorkerHost {
  const served = new Map(selection.map((s) => (typeof s === 'string' ? { queue: s } : s)).map((w) => [w.queue, w.shards]));
  return startWorkerHost(
    deps,
    [...served.keys()].map((q) => PROCESSORS[q]),
    (queue) => {
      const picked = served.get(queue);
      const key = (s: QueueShard) => `${s.prefix}:${s.name}`;
      const current = queueShards(deps.config.REDIS_PREFIX, queue, deps.config.QUEUE_SHARDS).map(key);
      return allShards(deps.config, queue).filter((s) => !picked || !current.includes(key(s)) || picked.includes(current.indexOf(key(s))));
    },
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const config = loadConfig();
  const tracing = await startTracing(config, { role: 'worker' });
  const deps = createDeps(config, { tracing });
  survivingUnhandledRejections(deps.logger, deps.metrics);
  await checkRedis(deps.redis, deps.logger, { shardedPubsub: deps.config.REDIS_SHARDED_PUBSUB });
  const host = startWorkers(deps);
  const metrics = config.WORKER_METRICS_PORT ? startMetricsServer(deps, config.WORKER_METRICS_PORT) : undefined;
  onShutdownSignal(deps.logger, config.SHUTDOWN_TIMEOUT_MS, async () => {
    await host.close();
    metrics?.close();
    await closeDeps(deps);
  });
}

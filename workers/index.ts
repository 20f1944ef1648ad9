import { checkRedis } from '../src/startup-checks.js';
import { survivingUnhandledRejections } from '../src/last-resort.js';
import { pathToFileURL } from 'node:url';
import type { QueueName } from '../src/config.js';
import { loadConfig } from '../src/config.js';
import { closeDeps, createDeps, type Deps } from '../src/deps.js';
import { startMetricsServer } from '../src/http/metrics-server.js';
import { onShutdownSignal } from '../src/shutdown.js';
import { startWorkerHost, type WorkerHost } from './host.js';
import { PROCESSORS } from './registry.js';

/** Starts the processors of the queues named in WORKER_QUEUES. */
export function startWorkers(deps: Deps, names: QueueName[] = deps.config.WORKER_QUEUES): WorkerHost {
  return startWorkerHost(
    deps,
    names.map((n) => PROCESSORS[n]),
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const config = loadConfig();
  const deps = createDeps(config);
  survivingUnhandledRejections(deps.logger, deps.metrics);
  await checkRedis(deps.redis, deps.logger);
  const host = startWorkers(deps);
  const metrics = config.WORKER_METRICS_PORT ? startMetricsServer(deps, config.WORKER_METRICS_PORT) : undefined;
  onShutdownSignal(deps.logger, config.SHUTDOWN_TIMEOUT_MS, async () => {
    await host.close();
    metrics?.close();
    await closeDeps(deps);
  });
}

import { createServer, type Server } from 'node:http';
import type { Deps } from '../deps.js';

/** /metrics for a worker-only process, which has no web server of its own. */
export function startMetricsServer(deps: Deps, port: number): Server {
  deps.metrics.watchQueues(deps.queues, { stuckAfterMs: deps.config.JOB_STUCK_MS });
  deps.metrics.watchPool(deps.sql);
  return createServer(async (req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'Content-Type': deps.metrics.registry.contentType });
    res.end(await deps.metrics.registry.metrics());
  }).listen(port);
}

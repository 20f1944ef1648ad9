import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Queues } from './queues.js';

/**
 * One registry per process (not prom-client's global), so tests can build several apps in one
 * process without metric name clashes.
 */
export interface Metrics {
  registry: Registry;
  httpDuration: Histogram<'method' | 'route' | 'status'>;
  jobDuration: Histogram<'queue' | 'outcome'>;
  ledgerBatchSize: Histogram<never>;
  streamClients: Gauge<never>;
  webhookAttempts: Counter<'outcome'>;
  /** Adds queue waiting/active/failed gauges read from Redis at scrape time. */
  watchQueues(queues: Queues): void;
}

export function createMetrics(options: { defaults?: boolean } = {}): Metrics {
  const registry = new Registry();
  if (options.defaults !== false) collectDefaultMetrics({ register: registry });
  const httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request duration by route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [registry],
  });
  const jobDuration = new Histogram({
    name: 'job_duration_seconds',
    help: 'Job processing duration by queue and outcome',
    labelNames: ['queue', 'outcome'] as const,
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
    registers: [registry],
  });
  const ledgerBatchSize = new Histogram({
    name: 'ledger_batch_size',
    help: 'Events written per ledger group commit',
    buckets: [1, 2, 5, 10, 25, 50, 100, 250, 500],
    registers: [registry],
  });
  const streamClients = new Gauge({ name: 'stream_clients', help: 'Open event-stream connections in this process', registers: [registry] });
  const webhookAttempts = new Counter({
    name: 'webhook_attempts_total',
    help: 'Outbound webhook delivery attempts by outcome',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  let watched = false;
  return {
    registry,
    httpDuration,
    jobDuration,
    ledgerBatchSize,
    streamClients,
    webhookAttempts,
    watchQueues(queues) {
      if (watched) return;
      watched = true;
      new Gauge({
        name: 'queue_jobs',
        help: 'Jobs per queue and state (waiting, active, delayed, failed)',
        labelNames: ['queue', 'state'] as const,
        registers: [registry],
        async collect() {
          this.reset();
          await Promise.all(
            Object.entries(queues).map(async ([name, queue]) => {
              const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'failed');
              for (const [state, n] of Object.entries(counts)) this.set({ queue: name, state }, n);
            }),
          );
        },
      });
    },
  };
}

import { createRedis } from '../src/redis.js';
import type { Cluster } from './cluster.js';
import type { TelegramFake, WebhookReceiver } from './fakes.js';

export interface Timing {
  /** Load before the fault (ms). */
  warmupMs: number;
  /** How long a dependency stays down (ms). */
  downMs: number;
  /** Load after recovery, before the writers stop (ms). */
  settleMs: number;
}

export interface ScenarioContext {
  cluster: Cluster;
  timing: Timing;
  log(message: string): void;
  /** The scenario application's webhook receiver. */
  receiver: WebhookReceiver;
  /** The platform fake every send goes to. */
  telegram: TelegramFake;
}

export interface Scenario {
  name: string;
  description: string;
  /** Applies the fault under load and undoes it; returns once the service should be whole again. */
  fault(ctx: ScenarioContext): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until the ledger queue has jobs in progress, so a kill lands in the middle of them. */
async function whileJobsActive(cluster: Cluster, queue: string, log: (m: string) => void): Promise<void> {
  const deadline = Date.now() + 5_000;
  const redis = createRedis(cluster.redis.url, 'blocking');
  try {
    for (;;) {
      const active = await redis.llen(`${cluster.env.REDIS_PREFIX}:q:${queue}:active`);
      if (active > 0) return log(`${active} ${queue} jobs active`);
      if (Date.now() > deadline) return log(`no ${queue} job seen active; killing anyway`);
      await sleep(5);
    }
  } finally {
    redis.disconnect();
  }
}

export const SCENARIOS: Scenario[] = [
  {
    name: 'worker-kill',
    description: 'kill -9 each worker process in turn in the middle of its ledger, send and webhook jobs, then start it again',
    async fault({ cluster, timing, log }) {
      for (const [i, queue] of [[0, 'ledger'], [1, 'send'], [0, 'webhook']] as const) {
        await whileJobsActive(cluster, queue, log);
        await cluster.kill('worker', i);
        await sleep(timing.downMs / 2);
        await cluster.restart('worker', i);
      }
    },
  },
  {
    name: 'web-kill',
    description: 'kill -9 a web process holding open event streams and requests in flight: clients resume on the other by cursor',
    async fault({ cluster, timing }) {
      await cluster.kill('web', 0);
      await sleep(timing.downMs);
      await cluster.restart('web', 0);
    },
  },
  {
    name: 'redis-restart',
    description: 'Redis crashes (SIGKILL) under load and comes back from its append-only file',
    async fault({ cluster, timing, log }) {
      await cluster.redis.stop('SIGKILL');
      log('redis-server killed');
      await sleep(timing.downMs);
      await cluster.redis.start();
      log('redis-server started again');
    },
  },
  {
    name: 'postgres-restart',
    description:
      "PostgreSQL restart, simulated on the chaos database only: new connections refused and every backend terminated, then reopened (the machine's server is never stopped)",
    async fault({ cluster, timing }) {
      await cluster.closeDatabase();
      await sleep(timing.downMs);
      await cluster.reopenDatabase();
    },
  },
  {
    name: 'webhook-receiver-down',
    description: 'the webhook receiver stops listening for a while, then comes back: every delivery must arrive, signed',
    async fault({ receiver, timing, log }) {
      await receiver.down();
      log('webhook receiver down');
      await sleep(timing.downMs);
      await receiver.up();
      log('webhook receiver up');
    },
  },
  {
    name: 'platform-bursts',
    description: 'the platform answers 500, then 429 (retry_after 1), in bursts: sends are retried, none doubled',
    async fault({ telegram, timing, log }) {
      for (const status of [500, 429, 500] as const) {
        telegram.burst(status, timing.downMs / 2);
        log(`platform fake answers ${status} for ${timing.downMs / 2} ms`);
        await sleep(timing.downMs / 2 + 500);
      }
    },
  },
];

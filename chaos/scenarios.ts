import { randomUUID } from 'node:crypto';
import { parseConfig, type QueueName } from '../src/config.js';
import { catalogQueues, queueFor, queuePrefix } from '../src/queues.js';
import { createRedis } from '../src/redis.js';
import type { AppCredentials, Cluster, SingleCluster } from './cluster.js';
import type { TelegramFake, WebhookReceiver } from './fakes.js';
import { brokerRestart, natsRestart } from './broker-scenario.js';
import { call } from './load.js';

export interface Timing {
  /** Load before the fault (ms). */
  warmupMs: number;
  /** How long a dependency stays down (ms). */
  downMs: number;
  /** The long outages (PostgreSQL stopped, backends terminated, slots filled): 20 s in the full run. */
  outageMs: number;
  /** Load after recovery, before the writers stop (ms). */
  settleMs: number;
}

export interface ScenarioContext<C extends Cluster = SingleCluster> {
  cluster: C;
  timing: Timing;
  log(message: string): void;
  /** The scenario's application. */
  appId: string;
  /** Its credentials, for a scenario that configures it through the API. */
  app: AppCredentials;
  /** Reports how long the service took to recover from the fault (seconds; the table's recovery column): what each scenario measures is in chaos/README.md. */
  recovered(seconds: number): void;
  /**
   * The moment the fault struck (ms since the epoch): the runner measures from it how long
   * until each queue the load uses completes a job created after it, and until the first 201.
   */
  faulted(at: number): void;
  /** The scenario application's webhook receiver. */
  receiver: WebhookReceiver;
  /** The platform fake every send goes to. */
  telegram: TelegramFake;
}

/** A scenario's own reconciliation, run after the drain: the faults it finds (empty when whole). */
export type ScenarioCheck = () => Promise<string[]>;

/** A scenario of the one-box topology (`C` = SingleCluster) or of the highly available one (HaCluster). */
export interface Scenario<C extends Cluster = SingleCluster> {
  name: string;
  description: string;
  /** Runs only when named (`--scenario`): too slow for the default and short runs. */
  optIn?: boolean;
  /** Service settings it needs beside the harness's; they apply to every scenario of that run. */
  serviceEnv?: Record<string, string>;
  /**
   * Applies the fault under load and undoes it; returns once the service should be whole
   * again, optionally with a check of what only this scenario can know.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: most faults return nothing; a few add a check.
  fault(ctx: ScenarioContext<C>): Promise<void | ScenarioCheck>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until the ledger queue has jobs in progress, so a kill lands in the middle of them. */
async function whileJobsActive(cluster: SingleCluster, queue: string, log: (m: string) => void): Promise<void> {
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

/** A read that goes through the web process's PostgreSQL pool. */
const readThroughPool = (base: string, app: AppCredentials) => call(`${base}/v1/events?limit=1`, { method: 'GET', headers: app.headers });

/** `perProcess` clients per web process reading through its pool back to back; `stop` answers their statuses. */
function keepReading(cluster: Cluster, app: AppCredentials, perProcess: number) {
  let reading = true;
  const statuses: Record<string, number> = {};
  const clients = cluster.liveWebBases().flatMap((base) =>
    Array.from({ length: perProcess }, async () => {
      while (reading) {
        const r = await readThroughPool(base, app);
        statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      }
    }),
  );
  return {
    async stop() {
      reading = false;
      await Promise.all(clients);
      return statuses;
    },
  };
}

/** How long after its fault a scenario's requests may go on failing before the run calls it a fault. */
const RECOVERY_LIMIT_MS = 30_000;

/**
 * Seconds from `since` until the web processes serve every request again, or null past
 * RECOVERY_LIMIT_MS. Each round sends every live web process twice its pool's size (10) of
 * reads that go through the pool, at once, so each connection of it gets one: a connection
 * that cannot serve fails its request, after up to `connect_timeout` (5 s). Recovered at the
 * start of the first round from which every round answered 2xx for 2 s.
 */
async function untilEveryConnectionServes(cluster: Cluster, app: AppCredentials, since: number): Promise<number | null> {
  const perProcess = 2 * 10;
  let cleanSince: number | undefined;
  while (Date.now() - since < RECOVERY_LIMIT_MS) {
    const started = Date.now();
    const answers = await Promise.all(
      cluster.liveWebBases().flatMap((base) => Array.from({ length: perProcess }, () => readThroughPool(base, app))),
    );
    if (answers.every((a) => /^2/.test(a.status))) cleanSince ??= started;
    else cleanSince = undefined;
    if (cleanSince !== undefined && Date.now() - cleanSince >= 2_000) return Math.max(0, cleanSince - since) / 1000;
    await sleep(100);
  }
  return null;
}

/** Ids of the jobs of `queue` active now. */
const activeJobIds = async (cluster: Cluster, queue: QueueName) =>
  (await Promise.all(catalogQueues(cluster.queues, queue).map((q) => q.getActive(0, 1000)))).flat().flatMap((j) => (j.id ? [j.id] : []));

/**
 * Seconds from `since` until none of `ids` is waiting or active any more: each job a dead or
 * frozen worker held was taken over and done (completed, failed, or handed to its own delayed
 * schedule). Bounded at 60 s.
 */
async function jobsSettled(cluster: Cluster, queue: QueueName, ids: string[], since: number): Promise<number> {
  const open = new Set(ids);
  while (open.size && Date.now() - since < 60_000) {
    for (const id of [...open]) {
      const states = await Promise.all(catalogQueues(cluster.queues, queue).map((q) => q.getJobState(id).catch(() => 'active')));
      const state = states.find((st) => st !== 'unknown') ?? 'unknown';
      if (state !== 'active' && state !== 'waiting' && state !== 'prioritized') open.delete(id);
    }
    if (open.size) await sleep(50);
  }
  return (Date.now() - since) / 1000;
}

const headSeq = async (cluster: Cluster, appId: string) =>
  (await cluster.sql<{ seq: number }[]>`SELECT seq FROM ledger_heads WHERE app_id = ${appId}`)[0]?.seq ?? 0;

/** Seconds from `since` until the application's ledger head moves past `seq` (a plain read: never blocked by the head's lock). */
async function commitsAgain(cluster: Cluster, appId: string, seq: number, since: number): Promise<number> {
  while (Date.now() - since < 60_000 && (await headSeq(cluster, appId)) <= seq) await sleep(20);
  return (Date.now() - since) / 1000;
}

/**
 * SIGSTOPs worker `index` at a moment its ledger transaction holds an application's head: one
 * of its sessions holds the ledger_heads row lock (RowShareLock of SELECT … FOR UPDATE) and,
 * once frozen, stays idle in its transaction. Tries again (SIGCONT first) when the transaction
 * ended between the look and the stop. Answers when it froze, or undefined after 15 s.
 */
async function freezeInLedgerTransaction(
  cluster: Cluster,
  index: number,
  log: (m: string) => void,
): Promise<{ at: number; backends: number[] } | undefined> {
  const holding = async (pids: number[]) =>
    (
      await cluster.sql<{ pid: number; state: string }[]>`
        SELECT a.pid, a.state FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
         WHERE a.pid = ANY(${pids}::int[]) AND l.granted AND l.relation = 'ledger_heads'::regclass AND l.mode = 'RowShareLock'`
    ).filter((r) => r.state !== null);
  const deadline = Date.now() + 15_000;
  for (let tries = 1; Date.now() < deadline; tries++) {
    const backends = await cluster.backendsOf('worker', index);
    if (!(await holding(backends)).length) continue;
    cluster.signal('worker', index, 'SIGSTOP');
    const stoppedAt = Date.now();
    // Whatever it had sent runs to its end; then a transaction still open is one it cannot end.
    await sleep(100);
    const held = (await holding(backends)).filter((r) => r.state === 'idle in transaction');
    if (held.length) {
      log(`worker${index} frozen inside its ledger transaction (backend ${held.map((r) => r.pid).join(', ')}, try ${tries})`);
      return { at: stoppedAt, backends: held.map((r) => r.pid) };
    }
    cluster.signal('worker', index, 'SIGCONT');
  }
  log(`worker${index} never caught inside a ledger transaction in 15 s`);
  return undefined;
}

export const SCENARIOS: Scenario[] = [
  {
    name: 'worker-kill',
    description: 'kill -9 each worker process in turn in the middle of its ledger, send and webhook jobs, then start it again',
    async fault({ cluster, timing, log, recovered }) {
      let slowest = 0;
      for (const [i, queue] of [
        [0, 'ledger'],
        [1, 'send'],
        [0, 'webhook'],
      ] as const) {
        await whileJobsActive(cluster, queue, log);
        const held = await activeJobIds(cluster, queue);
        const killedAt = Date.now();
        await cluster.kill('worker', i);
        const settled = jobsSettled(cluster, queue, held, killedAt);
        await sleep(timing.downMs / 2);
        await cluster.restart('worker', i);
        const s = await settled;
        log(`the ${held.length} ${queue} jobs active at the kill were done ${s.toFixed(1)} s after it`);
        slowest = Math.max(slowest, s);
      }
      recovered(slowest);
    },
  },
  {
    name: 'sigstop-in-transaction',
    description:
      "a worker is frozen (SIGSTOP) inside its ledger transaction, holding the application's head: the application must commit again within seconds, and the thawed worker commit nothing twice",
    async fault({ cluster, timing, log, appId, recovered }) {
      const frozen = await freezeInLedgerTransaction(cluster, 0, log);
      if (frozen === undefined) return async () => ['the worker was never frozen inside a ledger transaction: nothing measured'];
      const frozenAt = frozen.at;
      // Read once frozen: the head the frozen transaction holds is still the last committed one.
      const [held, seq] = await Promise.all([activeJobIds(cluster, 'ledger'), headSeq(cluster, appId)]);
      const again = await commitsAgain(cluster, appId, seq, frozenAt);
      log(`the application committed again ${again.toFixed(1)} s after the freeze`);
      const jobs = await jobsSettled(cluster, 'ledger', held, frozenAt);
      log(`the ${held.length} ledger jobs active at the freeze were done ${jobs.toFixed(1)} s after it`);
      recovered(Math.max(again, jobs));
      await sleep(timing.downMs);
      // Its transaction must be gone before it wakes, or it could still commit.
      const open = await cluster.sql`SELECT 1 FROM pg_stat_activity WHERE pid = ANY(${frozen.backends}::int[])`;
      cluster.signal('worker', 0, 'SIGCONT');
      if (open.length)
        return async () => [`the frozen writer's session was still open ${((Date.now() - frozenAt) / 1000).toFixed(1)} s after the freeze`];
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
    description: 'the private PostgreSQL server crashes (shutdown -m immediate: no checkpoint, crash recovery) and starts again',
    async fault({ cluster, timing, log }) {
      await cluster.postgres.stop('immediate');
      log('PostgreSQL stopped -m immediate');
      await sleep(timing.downMs);
      await cluster.postgres.start();
      log('PostgreSQL started again');
    },
  },
  {
    name: 'postgres-stopped',
    description:
      'PostgreSQL is stopped (-m fast) for the long outage, then started: the service answers 503 meanwhile and reconnects within ~1 s',
    async fault({ cluster, timing, log }) {
      await cluster.postgres.stop('fast');
      log(`PostgreSQL stopped for ${timing.outageMs} ms`);
      await sleep(timing.outageMs);
      await cluster.postgres.start();
      log('PostgreSQL started again');
    },
  },
  {
    name: 'backends-terminated',
    description:
      "the gateway's PostgreSQL backends are terminated every 300 ms for the long outage under busy pools (connections die mid-query, mid-transaction, mid-start-up); recovery is timed from the last kill",
    async fault({ cluster, timing, log, recovered }) {
      const probe = await cluster.createApp();
      // Busy pools, as the were: sessions end while queries are handed to them.
      const busy = keepReading(cluster, probe, 16);
      const until = Date.now() + timing.outageMs;
      let rounds = 0;
      let killed = 0;
      let lastKill = Date.now();
      while (Date.now() < until) {
        if (rounds) await sleep(300);
        killed += await cluster.terminateBackends().catch(() => 0);
        lastKill = Date.now();
        rounds++;
      }
      const answered = busy.stop();
      log(`${killed} backends terminated in ${rounds} rounds`);
      const recovery = await untilEveryConnectionServes(cluster, probe, lastKill);
      const statuses = await answered;
      log(`reads during the kills answered ${JSON.stringify(statuses)}`);
      const faults = Object.entries(statuses)
        .filter(([st]) => st === '500' || st === 'hang')
        .map(([st, n]) => `reads during the kills: ${n} × ${st === 'hang' ? 'no answer within 30 s' : 'HTTP 500'}`);
      if (recovery === null) faults.push(`requests still failing ${RECOVERY_LIMIT_MS / 1000} s after the last backend was terminated`);
      else {
        log(`requests answer 2xx again ${recovery.toFixed(1)} s after the last kill`);
        recovered(recovery);
      }
      return async () => faults;
    },
  },
  {
    name: 'slots-filled',
    description:
      'every PostgreSQL connection slot is taken by someone else for the long outage: new sessions are refused (53300), pools must cope',
    async fault({ cluster, timing, log }) {
      const slots = await cluster.fillSlots();
      log(`${slots.held} connection slots held`);
      await sleep(timing.outageMs);
      await slots.release();
      log('connection slots released');
    },
  },
  {
    name: 'pool-exhausted',
    description:
      'the events table is locked exclusively for a while: every pooled connection that touches it waits, so pools run dry; requests must not hang',
    async fault({ cluster, timing, log }) {
      log(`events locked for ${timing.downMs * 2} ms`);
      await cluster.lockTable('events', timing.downMs * 2);
      log('events unlocked');
    },
  },
  {
    name: 'worker-sigstop',
    description:
      'a worker is frozen (SIGSTOP) past its job lock, so its jobs are taken over, then thawed (SIGCONT): nothing may be done twice',
    async fault({ cluster, timing }) {
      await whileJobsActive(cluster, 'ledger', () => {});
      cluster.signal('worker', 0, 'SIGSTOP');
      await sleep(parseConfig(cluster.env).JOB_LOCK_MS + timing.downMs);
      cluster.signal('worker', 0, 'SIGCONT');
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
  {
    name: 'platform-silent',
    description: 'the platform reads every send and never answers: each message is called once, then fails as DELIVERY_UNCERTAIN',
    async fault({ telegram, timing, log }) {
      telegram.silence(timing.downMs);
      log(`platform fake silent for ${timing.downMs} ms`);
      await sleep(timing.downMs + 500);
    },
  },
  {
    name: 'poison-neighbour',
    description:
      "another application sends payloads nested thousands deep, and ledger jobs no write can store reach the queue behind the door: the scenario application's work is untouched, the poison ends dead-lettered",
    fault: poisonNeighbour,
  },
  brokerRestart,
  natsRestart,
];

/** Levels of nesting a poison payload has: far past any sane limit, short of the body limit. */
const POISON_DEPTH = 4_150;
const POISON_JOBS = 5;

/** Levels of the poison queued behind the door: JSON.parse reads it, JSON.stringify overflows. */
const BEHIND_THE_DOOR_DEPTH = 6_000;

/**
 * A ledger job no write can store, as a producer with a bug (or a path without the entrance
 * check) could leave in Redis: queued held back, its data replaced by an event nested 6,000
 * deep, then released among the scenario's own jobs. Answers its job id.
 */
async function poisonLedgerJob(cluster: Cluster, appId: string): Promise<string> {
  const id = randomUUID();
  const event = { id, app_id: appId, event_type: 'poison.deep', payload: {}, edges: [], attachments: [] };
  const job = await queueFor(cluster.queues, 'ledger').add(
    'ledger',
    { event },
    { jobId: `ev-${id}`, delay: 600_000, attempts: 3, backoff: { type: 'fixed', delay: 100 } },
  );
  const data = JSON.stringify({ event: { ...event, payload: '\u0001' } }).replace(
    '"\\u0001"',
    `${'{"a":'.repeat(BEHIND_THE_DOOR_DEPTH)}1${'}'.repeat(BEHIND_THE_DOOR_DEPTH)}`,
  );
  await cluster.queueRedis.hset(`${queuePrefix(cluster.env.REDIS_PREFIX)}:ledger:${job.id}`, 'data', data);
  await job.promote();
  return job.id!;
}

async function poisonNeighbour({ cluster, timing, log }: ScenarioContext<SingleCluster>): Promise<ScenarioCheck> {
  const other = await cluster.createApp();
  const deep = `{"event_type":"poison.deep","payload":${'{"a":'.repeat(POISON_DEPTH)}1${'}'.repeat(POISON_DEPTH)}}`;
  const answers: Record<string, number> = {};
  const jobIds: string[] = [];
  const until = Date.now() + timing.downMs;
  for (let i = 0; Date.now() < until; i++) {
    const base = cluster.liveWebBases()[i % cluster.liveWebBases().length];
    const r = await call(`${base}/v1/events`, {
      method: 'POST',
      headers: { ...other.headers, 'Content-Type': 'application/json' },
      raw: deep,
    });
    answers[r.status] = (answers[r.status] ?? 0) + 1;
    if (i < POISON_JOBS) jobIds.push(await poisonLedgerJob(cluster, other.appId));
    await sleep(50);
  }
  log(`deep payloads answered ${JSON.stringify(answers)}; ${jobIds.length} poison ledger jobs queued`);
  return async () => {
    const faults = Object.entries(answers)
      .filter(([status]) => status !== '400')
      .map(([status, n]) => `${n} payloads nested ${POISON_DEPTH} deep answered ${status} (expected 400 at the door)`);
    const deadline = Date.now() + 30_000;
    for (;;) {
      const states = await Promise.all(
        jobIds.map(async (id) => (await queueFor(cluster.queues, 'ledger').getJob(id))?.getState() ?? 'gone'),
      );
      const open = states.filter((st) => st !== 'failed');
      if (!open.length) break;
      if (Date.now() > deadline) {
        faults.push(`poison ledger jobs not dead-lettered after 30 s: ${open.join(', ')}`);
        break;
      }
      await sleep(250);
    }
    const [{ n }] = await cluster.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM events WHERE app_id = ${other.appId}`;
    if (n) faults.push(`${n} poison events were written to the ledger`);
    return faults;
  };
}

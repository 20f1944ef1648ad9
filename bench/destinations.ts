/**
 * Broker destinations: events committed through the ledger worker, each matching 10
 * subscriptions whose destination is RabbitMQ (one topic exchange, a queue bound to it) or NATS
 * JetStream (one stream), through the service's real delivery path (fan-out, signing, the
 * per-destination connection, the broker's confirm or ack). A consumer in the bench process
 * records when each message reaches the broker. Measured per kind: deliveries/s sustained under
 * a rate above capacity, and event-commit → broker latency p50/p99 under a steady rate the
 * system keeps up with. Floor, same run: the same number of messages published by a bare loop
 * with confirms/acks (bench/support/bare-broker-loop.ts), same connections and concurrency.
 * Targets (issue 33): ≥ 50% of the bare loop's rate, p50 < 20 ms.
 *
 * The machine's RabbitMQ (127.0.0.1:5672, guest) and NATS (127.0.0.1:4222, JetStream); every
 * exchange, queue and stream is named gwtest… and deleted at the end.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect as natsConnect } from '@nats-io/transport-node';
import { connect as amqpConnect } from 'amqplib';
import { createLogger } from '../src/logger.js';
import { closeQueues, createQueues, JOBS, queueFor } from '../src/queues.js';
import { createRedis } from '../src/redis.js';
import {
  cpuSeconds,
  listenerPid,
  machineBusySeconds,
  percentile,
  ratio,
  round,
  spawnService,
  startStack,
  target,
  until,
  type Bench,
} from './lib.js';

const AMQP = 'amqp://guest:guest@127.0.0.1:5672';
/** Where the machine's broker of each kind listens: its process's CPU is read by this port. */
const BROKER_PORT = { rabbitmq: 5672, nats: 4222 } as const;
const NATS = 'nats://127.0.0.1:4222';
const KINDS = ['rabbitmq', 'nats'] as const;
type Kind = (typeof KINDS)[number];
const SUBSCRIPTIONS = 10;
const CONCURRENCY = 200;
/** Offered load of the throughput phase: more than the machine delivers, so the rate is capacity. */
const SATURATE_EVENTS_PER_S = 800;

interface Arrival {
  /** The delivery id: a delivery published twice (at least once) arrives twice. */
  id: string;
  at: number;
  createdAt: number;
  builtAt: number;
}

/** When a message reached the broker, from the delivery body's `created_at` (the commit) and `timestamp` (built). */
const arrival = (body: string): Arrival => {
  const b = JSON.parse(body) as { id: string; created_at: string; timestamp: string };
  return { id: b.id, at: Date.now(), createdAt: Date.parse(b.created_at), builtAt: Date.parse(b.timestamp) };
};

const bench: Bench = {
  description:
    'broker deliveries (ledger commit → fan-out → publish with confirm/ack to RabbitMQ and to NATS JetStream, 10 subscriptions each) vs a bare publish loop with confirms/acks of the same messages',
  async run({ options, log }) {
    const durationS = options.durationS ?? 10;
    const id = randomBytes(6).toString('hex');
    // Each delivery's first arrival; a second publish of it (at least once) is only counted.
    const arrivals: Record<Kind, Arrival[]> = { rabbitmq: [], nats: [] };
    const seen: Record<Kind, Set<string>> = { rabbitmq: new Set(), nats: new Set() };
    const twice: Record<Kind, number> = { rabbitmq: 0, nats: 0 };
    const arrived = (kind: Kind, body: string) => {
      const a = arrival(body);
      if (seen[kind].has(a.id)) return void twice[kind]++;
      seen[kind].add(a.id);
      arrivals[kind].push(a);
    };
    const cleanups: (() => Promise<unknown>)[] = [];
    const loadBefore = loadavg()[0];
    const figures: Record<string, number | null> = {};
    const baselines: Record<string, number | null> = {};
    const notes: string[] = [];
    const delivered: Record<Kind, number> = { rabbitmq: 0, nats: 0 };
    const exchange = `gwtest.${id}.x`;
    const prefix = `gwtest.${id}`;
    try {
      // The brokers' side: where the gateway publishes, and a consumer timing each arrival.
      const amqp = await amqpConnect(AMQP);
      cleanups.push(() => amqp.close());
      const ch = await amqp.createChannel();
      await ch.assertExchange(exchange, 'topic', { durable: false, autoDelete: false });
      cleanups.push(() => ch.deleteExchange(exchange));
      await ch.assertQueue(`gwtest.${id}.q`, { durable: false, autoDelete: false });
      cleanups.push(() => ch.deleteQueue(`gwtest.${id}.q`));
      await ch.bindQueue(`gwtest.${id}.q`, exchange, 'bench.rabbitmq');
      await ch.consume(`gwtest.${id}.q`, (m) => m && arrived('rabbitmq', m.content.toString('utf8')), { noAck: true });
      const nc = await natsConnect({ servers: NATS });
      cleanups.push(() => nc.close());
      const jsm = await jetstreamManager(nc);
      await jsm.streams.add({ name: `gwtest_${id}`, subjects: [`${prefix}.>`] });
      cleanups.push(() => jsm.streams.delete(`gwtest_${id}`));
      // A core subscription sees each message as the server routes it to the stream.
      nc.subscribe(`${prefix}.bench.nats`, { callback: (_, m) => arrived('nats', m.string()) });

      const stack = await startStack({ workerQueues: 'ledger,webhook', env: { WEBHOOK_CONCURRENCY: String(CONCURRENCY) } });
      const queueRedis = createRedis(stack.env.REDIS_URL, 'blocking');
      const queues = createQueues(queueRedis, { REDIS_PREFIX: stack.env.REDIS_PREFIX, QUEUE_SHARDS: 1 }, createLogger('silent'));
      try {
        const app = await stack.createApp(['admin', 'events:write']);
        const destination: Record<Kind, Record<string, string>> = {
          rabbitmq: { kind: 'rabbitmq', url: AMQP, exchange, routing_key: '{event_type}' },
          nats: { kind: 'nats', url: NATS, subject: `${prefix}.{event_type}` },
        };
        for (const kind of KINDS)
          for (let i = 0; i < SUBSCRIPTIONS; i++) {
            const r = await fetch(`${stack.base}/v1/webhook-subscriptions`, {
              method: 'POST',
              headers: { ...app.headers, 'content-type': 'application/json' },
              body: JSON.stringify({ name: `bench ${kind}`, event_patterns: [`bench.${kind}`], destination: destination[kind] }),
            });
            if (r.status !== 201) throw new Error(`subscription: ${r.status} ${await r.text()}`);
          }
        let seq = 0;
        /** Offers `perS` events of `bench.<kind>` per second for `seconds`, in 10 ms ticks, onto the ledger queue. */
        const offer = async (kind: Kind, perS: number, seconds: number) => {
          const ticks = seconds * 100;
          const start = Date.now();
          let sent = 0;
          for (let t = 1; t <= ticks; t++) {
            const jobs = [];
            for (const due = Math.round((perS * t) / 100); sent < due; sent++) {
              const event = {
                id: randomUUID(),
                app_id: app.appId,
                event_type: `bench.${kind}`,
                payload: { i: seq++ },
                edges: [],
                attachments: [],
              };
              jobs.push({ name: 'ledger', data: { event }, opts: { jobId: JOBS.ledger.jobId({ event }) } });
            }
            if (jobs.length) await queueFor(queues, 'ledger').addBulk(jobs);
            const wait = start + t * 10 - Date.now();
            if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          }
          return sent;
        };

        for (const kind of KINDS) {
          const got = arrivals[kind];
          let offered = 0;
          const drain = () => until(async () => got.length >= offered * SUBSCRIPTIONS, 120_000, 50);
          log(`${kind}: warm-up`);
          offered += await offer(kind, 50, 2);
          await drain();

          log(`${kind}: throughput: ${SATURATE_EVENTS_PER_S} events/s × ${SUBSCRIPTIONS} subscriptions offered for ${durationS} s`);
          const before = got.length;
          // CPU seconds so far of each part a delivery goes through (Redis and the broker are the
          // machine's, shared with whatever else runs; the machine is everything).
          const parts = async () => {
            const backends = await stack.sql<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`;
            return {
              worker: stack.workers.reduce((t, w) => t + cpuSeconds(w.proc.pid!), 0),
              postgres: backends.reduce((t, b) => t + cpuSeconds(b.pid), 0),
              redis: cpuSeconds(listenerPid(6379) ?? 0),
              broker: cpuSeconds(listenerPid(BROKER_PORT[kind]) ?? 0),
              machine: machineBusySeconds(),
            };
          };
          const cpu0 = await parts();
          offered += await offer(kind, SATURATE_EVENTS_PER_S, durationS);
          if (!(await drain()))
            notes.push(`${kind}: throughput phase did not drain within 120 s (${got.length} of ${offered * SUBSCRIPTIONS})`);
          const phase = got
            .slice(before)
            .map((a) => a.at)
            .sort((x, y) => x - y);
          delivered[kind] = phase.length;
          // The middle 80% of arrivals: no ramp-up, no tail.
          const lo = Math.floor(phase.length * 0.1);
          const hi = Math.floor(phase.length * 0.9) - 1;
          const rate = hi > lo ? round(((hi - lo) * 1000) / (phase[hi] - phase[lo]), 1) : null;
          figures[`${kind}_deliveries_per_s`] = rate;
          const cpu1 = await parts();
          for (const part of ['worker', 'postgres', 'redis', 'broker', 'machine'] as const)
            figures[`${kind}_${part}_cpu_us_per_delivery`] = round(((cpu1[part] - cpu0[part]) * 1e6) / Math.max(1, phase.length), 1);
          log(`  ${phase.length} deliveries, ${rate} /s sustained`);

          const steady = Math.max(10, Math.floor(((rate ?? 1000) * 0.5) / SUBSCRIPTIONS));
          log(`${kind}: latency: ${steady} events/s (half the sustained delivery rate) for ${durationS} s`);
          const mark = got.length;
          const phaseStart = Date.now();
          offered += await offer(kind, steady, durationS);
          await drain();
          // This phase's events only: a throughput-phase delivery arriving late is not this phase's latency.
          const first = got.slice(mark).filter((a) => a.createdAt >= phaseStart);
          const lat = first.map((a) => a.at - a.createdAt).sort((x, y) => x - y);
          const toBuilt = first.map((a) => a.builtAt - a.createdAt).sort((x, y) => x - y);
          const toBroker = first.map((a) => a.at - a.builtAt).sort((x, y) => x - y);
          figures[`${kind}_commit_to_broker_p50_ms`] = round(percentile(lat, 50));
          figures[`${kind}_commit_to_broker_p99_ms`] = round(percentile(lat, 99));
          log(`  p50 ${percentile(lat, 50)} ms, p99 ${percentile(lat, 99)} ms over ${lat.length} deliveries`);
          notes.push(
            `${kind}: throughput ${SATURATE_EVENTS_PER_S} events/s offered for ${durationS} s (${phase.length} deliveries, rate over the middle 80% of arrivals); latency ${steady * SUBSCRIPTIONS} deliveries/s offered for ${durationS} s (${lat.length} deliveries), latency split at p50: commit → delivery built ${percentile(toBuilt, 50)} ms, built → at the broker ${percentile(toBroker, 50)} ms (p99 ${percentile(toBuilt, 99)} / ${percentile(toBroker, 99)} ms); ${twice[kind]} deliveries published a second time over the run (counted once)`,
          );
        }
      } finally {
        await closeQueues(queues);
        queueRedis.disconnect();
        await stack.stop();
      }

      for (const kind of KINDS) {
        log(
          `${kind}: floor: ${delivered[kind]} messages from a bare publish loop with ${kind === 'nats' ? 'JetStream acks' : 'publisher confirms'}`,
        );
        const bare = spawnService('bench/support/bare-broker-loop.ts', {
          BARE_KIND: kind,
          BARE_URL: kind === 'nats' ? NATS : AMQP,
          BARE_TARGET: kind === 'nats' ? prefix : exchange,
          BARE_CONNECTIONS: String(SUBSCRIPTIONS),
          BARE_COUNT: String(Math.max(1, delivered[kind])),
          BARE_CONCURRENCY: String(CONCURRENCY),
        });
        const brokerPid = listenerPid(BROKER_PORT[kind]) ?? 0;
        const [broker0, machine0] = [cpuSeconds(brokerPid), machineBusySeconds()];
        await bare.waitFor(/bare done/, 300_000);
        const [broker1, machine1] = [cpuSeconds(brokerPid), machineBusySeconds()];
        const [, ok, ms, cpuMs] = /bare done (\d+) ([\d.]+) ([\d.]+)/.exec(bare.output())!;
        await bare.exited;
        baselines[`bare_${kind}_broker_cpu_us_per_publish`] = round(((broker1 - broker0) * 1e6) / Number(ok), 1);
        baselines[`bare_${kind}_machine_cpu_us_per_publish`] = round(((machine1 - machine0) * 1e6) / Number(ok), 1);
        baselines[`bare_${kind}_publishes_per_s`] = round((Number(ok) * 1000) / Number(ms), 1);
        baselines[`bare_${kind}_cpu_us_per_publish`] = round((Number(cpuMs) * 1000) / Number(ok), 1);
        log(`  ${baselines[`bare_${kind}_publishes_per_s`]} /s`);
      }
    } finally {
      for (const c of cleanups.reverse()) await c().catch(() => {});
    }

    const ratios = Object.fromEntries(
      KINDS.flatMap((k) => [
        [
          `${k}_deliveries_per_s_vs_bare_${k}_publishes_per_s`,
          ratio(figures[`${k}_deliveries_per_s`], baselines[`bare_${k}_publishes_per_s`]),
        ],
        [
          `${k}_worker_cpu_us_per_delivery_vs_bare_${k}_cpu_us_per_publish`,
          ratio(figures[`${k}_worker_cpu_us_per_delivery`], baselines[`bare_${k}_cpu_us_per_publish`]),
        ],
        [
          `${k}_machine_cpu_us_per_delivery_vs_bare_${k}_machine_cpu_us_per_publish`,
          ratio(figures[`${k}_machine_cpu_us_per_delivery`], baselines[`bare_${k}_machine_cpu_us_per_publish`]),
        ],
      ]),
    );
    notes.push(
      `${SUBSCRIPTIONS} subscriptions per kind matching every event of its type, one ledger+webhook worker process, WEBHOOK_CONCURRENCY=${CONCURRENCY}; the bare loop: ${SUBSCRIPTIONS} connections, ${CONCURRENCY} publishes in flight, the same body and signature headers`,
      'CPU per delivery over the throughput phase, ledger commits included: the worker process, the PostgreSQL backends of the bench database, the Redis server, the broker server (found by its port) and the whole machine (/proc/stat: every process, other work on the machine too); the bare loop: its own process, the broker server and the machine while it ran',
      'RabbitMQ: a topic exchange and one non-durable queue (persistent messages, mandatory, publisher confirms); NATS: one file-storage stream (JetStream publish with Nats-Msg-Id, awaiting the ack); arrival timed by a consumer in the bench process (RabbitMQ: the queue, NATS: a core subscription on the subject)',
      `machine load average (1 min) ${loadBefore.toFixed(1)} at the start, ${loadavg()[0].toFixed(1)} at the end: the machine is shared with other work, which moves every figure`,
    );
    return {
      figures,
      baselines,
      ratios,
      targets: Object.fromEntries(
        KINDS.flatMap((k) => [
          [
            `${k}_deliveries_per_s_vs_bare_${k}_publishes_per_s`,
            target(ratios[`${k}_deliveries_per_s_vs_bare_${k}_publishes_per_s`], '>=', 0.5),
          ],
          [`${k}_commit_to_broker_p50_ms`, target(figures[`${k}_commit_to_broker_p50_ms`], '<', 20)],
        ]),
      ),
      notes,
    };
  },
};
export default bench;

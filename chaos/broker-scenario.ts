import { connect } from 'amqplib';
import { startPrivateNats } from '../test/helpers/nats-private.js';
import { addTestStream } from '../test/helpers/nats-streams.js';
import { startPrivateRabbitmq } from '../test/helpers/rabbitmq-private.js';
import type { PrivateServer } from '../test/helpers/server-process.js';
import type { Scenario, ScenarioCheck } from './scenarios.js';
import { call } from './load.js';
import { reconcileBrokerQueue } from './reconcile.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How long the check waits for the broker subscription's deliveries to settle after the drain. */
const SETTLE_MS = 90_000;

/** A private broker the scenario kills, what its subscription publishes to, and what it holds. */
interface ChaosBroker {
  server: PrivateServer;
  /** What the log calls it. */
  label: string;
  /** The subscription's `destination`. */
  destination: Record<string, unknown>;
  /** Every message the broker holds for the subscription: its delivery id and the event it carries. */
  messages(): Promise<{ deliveryId: string; eventId: string }[]>;
  /** The broker drops a publish repeated under the same id itself (JetStream's duplicate window): a duplicate is a fault. */
  deduplicates: boolean;
}

/** A private RabbitMQ node with a durable topic exchange and a durable queue bound to every key. */
async function rabbitmqBroker(): Promise<ChaosBroker> {
  const server = await startPrivateRabbitmq();
  try {
    const setup = await connect(server.url);
    const ch = await setup.createChannel();
    await ch.assertExchange('chaos.x', 'topic', { durable: true });
    await ch.assertQueue('chaos.q', { durable: true });
    await ch.bindQueue('chaos.q', 'chaos.x', '#');
    await setup.close();
  } catch (err) {
    await server.destroy();
    throw err;
  }
  return {
    server,
    label: `RabbitMQ ${server.nodename}`,
    destination: { kind: 'rabbitmq', url: server.url, exchange: 'chaos.x', routing_key: '{event_type}' },
    deduplicates: false,
    async messages() {
      const conn = await connect(server.url);
      const messages: { deliveryId: string; eventId: string }[] = [];
      try {
        const ch = await conn.createChannel();
        for (;;) {
          const m = await ch.get('chaos.q', { noAck: true });
          if (!m) return messages;
          messages.push({ deliveryId: String(m.properties.messageId), eventId: JSON.parse(m.content.toString('utf8')).event_id });
        }
      } finally {
        await conn.close();
      }
    },
  };
}

/** A private nats-server with a file-stored stream (2-minute duplicate window) capturing the subscription's subjects. */
async function natsBroker(): Promise<ChaosBroker> {
  const server = await startPrivateNats();
  try {
    const stream = await addTestStream(server);
    return {
      server,
      label: `nats-server :${server.port}`,
      destination: { kind: 'nats', url: server.url, subject: `${stream.prefix}.{event_type}` },
      deduplicates: true,
      messages: async () => (await stream.messages()).map((m) => ({ deliveryId: m.msgId, eventId: JSON.parse(m.data).event_id as string })),
    };
  } catch (err) {
    await server.destroy();
    throw err;
  }
}

/**
 * A broker destination under the standard load: a private broker (test/helpers/*-private.ts)
 * gets every event of the scenario's application, and is killed and started again. The
 * check: every ledger event committed once the subscription was live is at the broker (by
 * delivery id), no delivery ended failed, duplicates counted.
 */
function brokerRestartOf(name: string, description: string, start: () => Promise<ChaosBroker>): Scenario {
  return {
    name,
    description,
    optIn: true,
    // The broker is away for the outage plus its boot (RabbitMQ: 13 s here, more under load): two more 8 s
    // retries than the harness's ~15 s schedule, so a delivery fails only if the broker never returns.
    serviceEnv: { WEBHOOK_RETRY_DELAYS_MS: '0,1000,2000,4000,8000,8000,8000,8000' },
    async fault({ cluster, timing, log, app, faulted }) {
      const broker = await start();
      const { server } = broker;
      log(`private ${broker.label} up in ${(server.lastStartMs / 1000).toFixed(1)} s`);
      try {
        const sub = await call(`${cluster.liveWebBases()[0]}/v1/webhook-subscriptions`, {
          method: 'POST',
          headers: app.headers,
          body: { name: 'chaos broker', event_patterns: ['*'], destination: broker.destination },
        });
        if (sub.status !== '201') throw new Error(`creating the broker subscription answered ${sub.status} ${JSON.stringify(sub.json)}`);
        const subId = sub.json.id as string;
        // From its first delivery on, every process's cache has it: later events must all reach the broker.
        while (!(await cluster.sql`SELECT 1 FROM webhook_deliveries WHERE subscription_id = ${subId} LIMIT 1`).length) await sleep(50);
        await sleep(1_000);
        const [{ seq: fromSeq }] = await cluster.sql<{ seq: number }[]>`SELECT seq FROM ledger_heads WHERE app_id = ${app.appId}`;
        await sleep(timing.downMs);
        faulted(Date.now());
        await server.stop('SIGKILL');
        const killedAt = Date.now();
        log(`${broker.label} killed`);
        await sleep(timing.downMs);
        await server.start();
        log(
          `${broker.label} started again, ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill (start ${(server.lastStartMs / 1000).toFixed(1)} s)`,
        );
        return brokerCheck(cluster, log, app.appId, subId, fromSeq, broker);
      } catch (err) {
        await server.destroy();
        throw err;
      }
    },
  };
}

export const brokerRestart = brokerRestartOf(
  'broker-restart',
  'a RabbitMQ destination on a private broker that is killed (SIGKILL) under load and started again: every event in its queue',
  rabbitmqBroker,
);

export const natsRestart = brokerRestartOf(
  'broker-restart-nats',
  'a NATS JetStream destination on a private nats-server that is killed (SIGKILL) under load and started again: every event in its stream, none twice',
  natsBroker,
);

function brokerCheck(
  cluster: Parameters<Scenario['fault']>[0]['cluster'],
  log: (m: string) => void,
  appId: string,
  subId: string,
  fromSeq: number,
  broker: ChaosBroker,
): ScenarioCheck {
  return async () => {
    try {
      const deadline = Date.now() + SETTLE_MS;
      let open = -1;
      while (open !== 0 && Date.now() < deadline) {
        [{ n: open }] = await cluster.sql<{ n: number }[]>`
          SELECT count(*)::int AS n FROM webhook_deliveries WHERE subscription_id = ${subId} AND status IN ('pending', 'retrying')`;
        if (open) await sleep(250);
      }
      const failedRows = await cluster.sql<{ id: string }[]>`
        SELECT id FROM webhook_deliveries WHERE subscription_id = ${subId} AND status = 'failed'`;
      const expected = (
        await cluster.sql<{ id: string }[]>`SELECT id FROM events WHERE app_id = ${appId} AND seq > ${fromSeq} ORDER BY seq`
      ).map((r) => r.id);
      const count = reconcileBrokerQueue(expected, await broker.messages());
      // How hard the outage hit: attempts that failed, and of those the ones that may have reached the
      // broker all the same (anything but a refused connect: a confirm or ack lost with the connection).
      const [attempts] = await cluster.sql<{ failed: number; unconfirmed: number; retried: number }[]>`
        SELECT count(*)::int AS failed,
               count(*) FILTER (WHERE error_message NOT ILIKE '%ECONNREFUSED%' AND error_message NOT ILIKE '%connection refused%')::int AS unconfirmed,
               count(DISTINCT delivery_id)::int AS retried
          FROM webhook_delivery_logs WHERE subscription_id = ${subId} AND status <> 'delivered'`;
      log(
        `${broker.label}: ${count.expected} events in the ledger since the subscription was live, ${count.unique} unique delivery ids at the broker, ${count.missing} missing, ${count.duplicates} duplicates (a publish repeated after its confirm or ack was lost and not de-duplicated); ${attempts.failed} failed attempts of ${attempts.retried} deliveries, ${attempts.unconfirmed} of them other than a refused connect`,
      );
      await explainDuplicates(cluster, log, count.copies);
      const faults: string[] = [];
      if (open) faults.push(`${open} broker deliveries still pending or retrying ${SETTLE_MS / 1000} s after the drain`);
      if (failedRows.length) faults.push(`${failedRows.length} broker deliveries ended failed (dead-lettered)`);
      if (count.missing) faults.push(`${count.missing} ledger events missing at the broker`);
      if (broker.deduplicates && count.duplicates)
        faults.push(`${count.duplicates} messages stored twice under one Nats-Msg-Id (inside the duplicate window)`);
      return faults;
    } finally {
      await broker.server.destroy();
    }
  };
}

/**
 * Each duplicated delivery's attempts as the delivery log has them: a copy beyond one plus the
 * attempts that may have reached the broker unconfirmed (anything but a refused connect) was
 * sent by an attempt the log does not show as failed.
 */
async function explainDuplicates(
  cluster: Parameters<Scenario['fault']>[0]['cluster'],
  log: (m: string) => void,
  copies: Map<string, number>,
): Promise<void> {
  if (copies.size === 0) return;
  const rows = await cluster.sql<{ delivery_id: string; attempt_count: number; status: string; error_message: string | null; at: Date }[]>`
    SELECT delivery_id, attempt_count, status, error_message, created_at AS at FROM webhook_delivery_logs
     WHERE delivery_id = ANY(${[...copies.keys()]}::uuid[]) ORDER BY created_at`;
  const unexplained = [...copies].filter(
    ([id, n]) =>
      n >
      1 +
        rows.filter(
          (r) => r.delivery_id === id && r.status !== 'delivered' && !/ECONNREFUSED|connection refused/i.test(r.error_message ?? ''),
        ).length,
  );
  log(`${copies.size} delivery ids at the broker more than once, ${unexplained.length} of them with more copies than unconfirmed attempts`);
  for (const [id, n] of unexplained.slice(0, 5))
    log(
      `  ${id}: ${n} copies; attempts ${JSON.stringify(rows.filter((r) => r.delivery_id === id).map((r) => [r.attempt_count, r.status, r.error_message, r.at.toISOString()]))}`,
    );
}

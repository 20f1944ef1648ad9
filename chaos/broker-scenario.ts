import { connect } from 'amqplib';
import { startPrivateRabbitmq } from '../test/helpers/rabbitmq-private.js';
import type { Scenario, ScenarioCheck } from './scenarios.js';
import { call } from './load.js';
import { reconcileBrokerQueue } from './reconcile.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How long the check waits for the broker subscription's deliveries to settle after the drain. */
const SETTLE_MS = 90_000;

/**
 * A RabbitMQ destination under the standard load: a private broker (test/helpers/rabbitmq-private.ts)
 * with a durable queue gets every event of the scenario's application, and is killed and
 * started again. The check: every ledger event committed once the subscription was live is
 * in the queue (by delivery id), no delivery ended failed, duplicates counted.
 */
export const brokerRestart: Scenario = {
  name: 'broker-restart',
  description: 'a RabbitMQ destination on a private broker that is killed (SIGKILL) under load and started again: every event in its queue',
  optIn: true,
  // The broker is away for the outage plus its boot (13 s here, more under load): two more 8 s
  // retries than the harness's ~15 s schedule, so a delivery fails only if the broker never returns.
  serviceEnv: { WEBHOOK_RETRY_DELAYS_MS: '0,1000,2000,4000,8000,8000,8000,8000' },
  async fault({ cluster, timing, log, app, faulted }) {
    const broker = await startPrivateRabbitmq();
    log(`private RabbitMQ ${broker.nodename} up in ${(broker.lastStartMs / 1000).toFixed(1)} s`);
    try {
      const setup = await connect(broker.url);
      const ch = await setup.createChannel();
      await ch.assertExchange('chaos.x', 'topic', { durable: true });
      await ch.assertQueue('chaos.q', { durable: true });
      await ch.bindQueue('chaos.q', 'chaos.x', '#');
      await setup.close();
      const sub = await call(`${cluster.liveWebBases()[0]}/v1/webhook-subscriptions`, {
        method: 'POST',
        headers: app.headers,
        body: {
          name: 'chaos broker',
          event_patterns: ['*'],
          destination: { kind: 'rabbitmq', url: broker.url, exchange: 'chaos.x', routing_key: '{event_type}' },
        },
      });
      if (sub.status !== '201') throw new Error(`creating the broker subscription answered ${sub.status} ${JSON.stringify(sub.json)}`);
      const subId = sub.json.id as string;
      // From its first delivery on, every process's cache has it: later events must all reach the queue.
      while (!(await cluster.sql`SELECT 1 FROM webhook_deliveries WHERE subscription_id = ${subId} LIMIT 1`).length) await sleep(50);
      await sleep(1_000);
      const [{ seq: fromSeq }] = await cluster.sql<{ seq: number }[]>`SELECT seq FROM ledger_heads WHERE app_id = ${app.appId}`;
      await sleep(timing.downMs);
      faulted(Date.now());
      await broker.stop('SIGKILL');
      const killedAt = Date.now();
      log('RabbitMQ killed');
      await sleep(timing.downMs);
      await broker.start();
      log(
        `RabbitMQ started again, ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill (boot ${(broker.lastStartMs / 1000).toFixed(1)} s)`,
      );
      return brokerCheck(cluster, log, app.appId, subId, fromSeq, broker);
    } catch (err) {
      await broker.destroy();
      throw err;
    }
  },
};

function brokerCheck(
  cluster: Parameters<Scenario['fault']>[0]['cluster'],
  log: (m: string) => void,
  appId: string,
  subId: string,
  fromSeq: number,
  broker: Awaited<ReturnType<typeof startPrivateRabbitmq>>,
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
      const conn = await connect(broker.url);
      const messages: { deliveryId: string; eventId: string }[] = [];
      try {
        const ch = await conn.createChannel();
        for (;;) {
          const m = await ch.get('chaos.q', { noAck: true });
          if (!m) break;
          messages.push({ deliveryId: String(m.properties.messageId), eventId: JSON.parse(m.content.toString('utf8')).event_id });
        }
      } finally {
        await conn.close();
      }
      const count = reconcileBrokerQueue(expected, messages);
      log(
        `broker queue: ${count.expected} events in the ledger since the subscription was live, ${count.unique} unique delivery ids in the queue, ${count.missing} missing, ${count.duplicates} duplicates (at least once: a confirm lost with the connection)`,
      );
      const faults: string[] = [];
      if (open) faults.push(`${open} broker deliveries still pending or retrying ${SETTLE_MS / 1000} s after the drain`);
      if (failedRows.length) faults.push(`${failedRows.length} broker deliveries ended failed (dead-lettered)`);
      if (count.missing) faults.push(`${count.missing} ledger events missing from the broker queue`);
      return faults;
    } finally {
      await broker.destroy();
    }
  };
}

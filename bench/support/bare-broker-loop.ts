/**
 * The floor for the destinations bench: the same number of messages as the gateway delivered,
 * published by a bare loop from its own process with the broker's acknowledgement awaited —
 * RabbitMQ: persistent, mandatory, on a confirm channel; NATS: a JetStream publish with
 * `Nats-Msg-Id` — one connection per "subscription" as the gateway keeps, the same body size,
 * the same signature headers and the same concurrency. Everything a delivery is, minus the
 * queue, the database and the bookkeeping.
 *
 * Env: BARE_KIND (rabbitmq | nats), BARE_URL, BARE_TARGET (exchange or subject prefix),
 * BARE_CONNECTIONS, BARE_COUNT, BARE_CONCURRENCY.
 * Prints `bare done <count> <ms> <cpu ms>` (the process's user + system CPU during the loop).
 */
import { performance } from 'node:perf_hooks';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { connect as natsConnect, headers as natsHeaders } from '@nats-io/transport-node';
import { connect as amqpConnect, type ConfirmChannel } from 'amqplib';
import { signedDelivery } from './signed-delivery.js';

const kind = process.env.BARE_KIND;
const url = process.env.BARE_URL ?? '';
const target = process.env.BARE_TARGET ?? '';
const connections = Number(process.env.BARE_CONNECTIONS ?? 10);
const count = Number(process.env.BARE_COUNT ?? 1000);
const concurrency = Number(process.env.BARE_CONCURRENCY ?? 200);
const message = (i: number) => signedDelivery(i, 'bench.destination');

type Publish = (conn: number, i: number) => Promise<void>;
const closers: (() => Promise<unknown>)[] = [];
let publish: Publish;

if (kind === 'rabbitmq') {
  const channels: ConfirmChannel[] = [];
  for (let c = 0; c < connections; c++) {
    const conn = await amqpConnect(url);
    closers.push(() => conn.close());
    channels.push(await conn.createConfirmChannel());
  }
  publish = (c, i) => {
    const m = message(i);
    return new Promise((resolve, reject) =>
      channels[c].publish(
        target,
        'bench.destination',
        Buffer.from(m.body),
        { persistent: true, mandatory: true, contentType: 'application/json', messageId: m.id, headers: m.headers },
        (err: unknown) => (err ? reject(err) : resolve()),
      ),
    );
  };
} else if (kind === 'nats') {
  const clients: JetStreamClient[] = [];
  for (let c = 0; c < connections; c++) {
    const nc = await natsConnect({ servers: url });
    closers.push(() => nc.close());
    clients.push(jetstream(nc));
  }
  publish = async (c, i) => {
    const m = message(i);
    const h = natsHeaders();
    for (const [k, v] of Object.entries(m.headers)) h.set(k, v);
    h.set('content-type', 'application/json');
    await clients[c].publish(`${target}.bench.destination`, m.body, { msgID: m.id, headers: h });
  };
} else {
  throw new Error(`BARE_KIND must be rabbitmq or nats, not ${kind}`);
}

let next = 0;
let failed = 0;
const worker = async () => {
  for (;;) {
    const i = next++;
    if (i >= count) return;
    await publish(i % connections, i).catch(() => failed++);
  }
};
const started = performance.now();
const cpu0 = process.cpuUsage();
await Promise.all(Array.from({ length: concurrency }, worker));
const ms = performance.now() - started;
const cpu = process.cpuUsage(cpu0);
await Promise.allSettled(closers.map((c) => c()));
process.stdout.write(`bare done ${count - failed} ${ms.toFixed(1)} ${((cpu.user + cpu.system) / 1000).toFixed(1)}\n`);

/**
 * The floor for the webhooks bench: the same number of signed POSTs as the gateway delivered,
 * sent by a bare undici loop (a keep-alive Pool per receiver, the same two HMAC signatures, the
 * same concurrency) from its own process — everything a delivery is, minus the queue, the
 * database and the bookkeeping.
 *
 * Env: BARE_TARGETS (comma-separated URLs), BARE_COUNT, BARE_CONCURRENCY, BARE_CONNECTIONS.
 * Prints `bare done <count> <ms> <cpu ms>` (the process's user + system CPU during the loop).
 */
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { signedDelivery } from './signed-delivery.js';

const targets = (process.env.BARE_TARGETS ?? '')
  .split(',')
  .filter(Boolean)
  .map((u) => new URL(u));
const count = Number(process.env.BARE_COUNT ?? 1000);
const concurrency = Number(process.env.BARE_CONCURRENCY ?? 64);
const connections = Number(process.env.BARE_CONNECTIONS ?? 32);
const pools = new Map(targets.map((t) => [t.origin, new Pool(t.origin, { connections })]));

let next = 0;
let failed = 0;
const worker = async () => {
  for (;;) {
    const i = next++;
    if (i >= count) return;
    const target = targets[i % targets.length];
    const { body, headers } = signedDelivery(i, 'bench.webhook');
    const res = await pools.get(target.origin)!.request({
      method: 'POST',
      path: target.pathname,
      headers: { 'content-type': 'application/json', ...headers },
      body,
      signal: AbortSignal.timeout(30_000),
    });
    await res.body.text();
    if (res.statusCode < 200 || res.statusCode >= 300) failed++;
  }
};
const started = performance.now();
const cpu0 = process.cpuUsage();
await Promise.all(Array.from({ length: concurrency }, worker));
const ms = performance.now() - started;
const cpu = process.cpuUsage(cpu0);
await Promise.all([...pools.values()].map((p) => p.close()));
process.stdout.write(`bare done ${count - failed} ${ms.toFixed(1)} ${((cpu.user + cpu.system) / 1000).toFixed(1)}\n`);

/**
 * The floor for the webhooks bench: the same number of signed POSTs as the gateway delivered,
 * sent by a bare undici loop (a keep-alive Pool per receiver, the same two HMAC signatures, the
 * same concurrency) from its own process — everything a delivery is, minus the queue, the
 * database and the bookkeeping.
 *
 * Env: BARE_TARGETS (comma-separated URLs), BARE_COUNT, BARE_CONCURRENCY, BARE_CONNECTIONS.
 * Prints `bare done <count> <ms> <cpu ms>` (the process's user + system CPU during the loop).
 */
import { createHmac, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';

const targets = (process.env.BARE_TARGETS ?? '')
  .split(',')
  .filter(Boolean)
  .map((u) => new URL(u));
const count = Number(process.env.BARE_COUNT ?? 1000);
const concurrency = Number(process.env.BARE_CONCURRENCY ?? 64);
const connections = Number(process.env.BARE_CONNECTIONS ?? 32);
const key = Buffer.alloc(32, 7);
const secret = `whsec_${key.toString('base64')}`;
const pools = new Map(targets.map((t) => [t.origin, new Pool(t.origin, { connections })]));

let next = 0;
let failed = 0;
const worker = async () => {
  for (;;) {
    const i = next++;
    if (i >= count) return;
    const target = targets[i % targets.length];
    const id = randomUUID();
    const body = JSON.stringify({
      id,
      subscription_id: randomUUID(),
      event_id: randomUUID(),
      event_type: 'bench.webhook',
      app_id: randomUUID(),
      payload: { i, order_id: `ord-${i}`, amount: i % 1000, note: 'a small realistic payload' },
      edges: {},
      created_at: new Date().toISOString(),
      timestamp: new Date().toISOString(),
    });
    const ts = Math.floor(Date.now() / 1000);
    // Signed as a real delivery with a generated secret is: X-Service-Signature plus Standard Webhooks.
    const signature = `sha256=${createHmac('sha256', secret).update(`${ts}.${body}`).digest('hex')}`;
    const standard = `v1,${createHmac('sha256', key).update(`${id}.${ts}.${body}`).digest('base64')}`;
    const res = await pools.get(target.origin)!.request({
      method: 'POST',
      path: target.pathname,
      headers: {
        'content-type': 'application/json',
        'x-service-signature': signature,
        'x-service-timestamp': String(ts),
        'x-service-delivery-id': id,
        'webhook-id': id,
        'webhook-timestamp': String(ts),
        'webhook-signature': standard,
      },
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

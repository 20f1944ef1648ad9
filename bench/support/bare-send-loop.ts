/**
 * The floor for the send bench: the same sendMessage calls the gateway makes, sent to the
 * same fake by a bare undici loop (one keep-alive Pool, the same concurrency) from its own
 * process — a platform call minus the API, queue, budgets, database and ledger.
 *
 * Env: BARE_TARGET (the fake's origin), BARE_COUNT, BARE_CONCURRENCY. Prints `bare done <ok> <ms>`.
 */
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';

const origin = process.env.BARE_TARGET ?? 'http://127.0.0.1:1';
const count = Number(process.env.BARE_COUNT ?? 1000);
const concurrency = Number(process.env.BARE_CONCURRENCY ?? 32);
const pool = new Pool(origin, { connections: concurrency });

let next = 0;
let ok = 0;
const worker = async () => {
  for (;;) {
    const i = next++;
    if (i >= count) return;
    const token = `${700000 + (i % 100)}:bare-bench-token`;
    const res = await pool.request({
      method: 'POST',
      path: `/bot${token}/sendMessage`,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ chat_id: String(100000 + (i % 10_000)), text: `bench message ${i}` }),
    });
    const body = (await res.body.json()) as { ok?: boolean };
    if (res.statusCode === 200 && body.ok) ok++;
  }
};
const started = performance.now();
await Promise.all(Array.from({ length: concurrency }, worker));
const ms = performance.now() - started;
await pool.close();
process.stdout.write(`bare done ${ok} ${ms.toFixed(1)}\n`);

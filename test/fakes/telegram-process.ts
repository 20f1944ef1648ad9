/**
 * The Telegram fake in a process of its own, so that its clock and event loop are not the
 * ones of the service it measures: a stall of the service's loop must not look like a burst
 * of arrivals. Used by rate tests and the send bench.
 *
 * Env: FAKE_LIMITS=1 enforces the documented limits; FAKE_KEEP=1 keeps every accepted send
 * (chat, text, arrival) for `GET /stats?sends=1`. Prints `fake listening <port> stats <port>`.
 * `GET /stats` on the stats port answers `{accepted, firstAt, lastAt, limitHits, sends?}`
 * (times in ms, performance clock of this process).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { spawnService } from '../helpers/stack.js';
import { TelegramFake } from './telegram.js';

export interface TelegramProcessStats {
  accepted: number;
  firstAt: number | null;
  lastAt: number | null;
  limitHits: number;
  sends?: { chat_id: string; text: string; at: number }[];
}

/** Starts this file as a child process; `stats()` reads its counters. */
export async function startTelegramProcess(o: { limits: boolean; keep: boolean }) {
  const proc = spawnService('test/fakes/telegram-process.ts', { FAKE_LIMITS: o.limits ? '1' : '0', FAKE_KEEP: o.keep ? '1' : '0' });
  await proc.waitFor(/fake listening \d+ stats \d+/, 30_000);
  const [, port, statsPort] = proc.output().match(/fake listening (\d+) stats (\d+)/)!;
  return {
    url: `http://127.0.0.1:${port}`,
    stats: async (sends = false) =>
      (await (await fetch(`http://127.0.0.1:${statsPort}/stats${sends ? '?sends=1' : ''}`)).json()) as TelegramProcessStats,
    async stop() {
      proc.kill('SIGTERM');
      await proc.exited;
    },
  };
}

if (process.argv[1]?.endsWith('telegram-process.ts')) {
  const keep = process.env.FAKE_KEEP === '1';
  const fake = await TelegramFake.start({ limits: process.env.FAKE_LIMITS === '1', keepRequests: keep });
  const stats = createServer((req, res) => {
    const body: TelegramProcessStats = { ...fake.counts, limitHits: fake.limitHits };
    if (req.url?.includes('sends=1'))
      body.sends = fake.accepted.map((r) => ({ chat_id: String(r.json?.chat_id), text: String(r.json?.text), at: r.at }));
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(body));
  });
  await new Promise<void>((r) => stats.listen(0, '127.0.0.1', r));
  process.stdout.write(`fake listening ${new URL(fake.url).port} stats ${(stats.address() as AddressInfo).port}\n`);
  process.on('SIGTERM', () => {
    stats.close();
    void fake.close().then(() => process.exit(0));
  });
}

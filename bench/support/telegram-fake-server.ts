/**
 * The Telegram fake of the tests (test/fakes/telegram.ts) in its own process for the send
 * bench, so the load generator and the platform do not share an event loop.
 *
 * Env: FAKE_LIMITS=1 to enforce the documented limits (30 msg/s per bot, 1 msg/s per chat).
 * Prints `fake listening <port> stats <port>`; GET on the stats port answers
 * `{accepted, firstAt, lastAt, limitHits}` (times in ms, performance clock of this process).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TelegramFake } from '../../test/fakes/telegram.js';

const fake = await TelegramFake.start({ limits: process.env.FAKE_LIMITS === '1', keepRequests: false });
const stats = createServer((_req, res) => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ ...fake.counts, limitHits: fake.limitHits }));
});
await new Promise<void>((r) => stats.listen(0, '127.0.0.1', r));
process.stdout.write(`fake listening ${new URL(fake.url).port} stats ${(stats.address() as AddressInfo).port}\n`);
process.on('SIGTERM', () => {
  stats.close();
  void fake.close().then(() => process.exit(0));
});

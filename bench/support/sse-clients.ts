/**
 * SSE clients for the fanout bench, run as their own process so their parsing does not share
 * an event loop with the bench: CLIENTS_N connections to CLIENTS_URL (GET /events/stream),
 * each checking that it receives every event exactly once and in ledger order (the cursor
 * carries the position) and recording commit → receipt latency into a histogram.
 *
 * Prints `clients connected` once every stream answered 200, then, when every client has
 * CLIENTS_EXPECT events (or CLIENTS_TIMEOUT_MS passed), closes them and prints
 * `clients done <json>`; it then idles until killed.
 */
import { request, type IncomingMessage } from 'node:http';
import { performance } from 'node:perf_hooks';

const url = new URL(process.env.CLIENTS_URL!);
const n = Number(process.env.CLIENTS_N);
const expect = Number(process.env.CLIENTS_EXPECT);
const timeoutMs = Number(process.env.CLIENTS_TIMEOUT_MS ?? 120_000);
const headers = JSON.parse(process.env.CLIENTS_HEADERS ?? '{}') as Record<string, string>;

/** 0.1 ms buckets up to 120 s (a 5,000-client run on a busy machine lags by tens of seconds); beyond that the last bucket. */
const BUCKET_MS = 0.1;
const hist = new Uint32Array(1_200_000);
let maxMs = 0;
let samples = 0;

interface Client {
  last: number;
  received: number;
  duplicates: number;
  gaps: number;
  reordered: number;
  buf: string;
}
const clients: Client[] = [];
const clientsSockets: IncomingMessage[] = [];
let connected = 0;
let failed = 0;

const now = () => performance.timeOrigin + performance.now();

/** The ledger position inside a cursor (`v1|seq|created_at|id`, base64url). */
const seqOf = (cursor: string) => Number(Buffer.from(cursor, 'base64url').toString('utf8').split('|')[1]);

/** created_at with its microseconds, as epoch ms. */
function createdMs(frame: string): number {
  const i = frame.indexOf('"createdAt":"');
  const iso = frame.slice(i + 13, i + 13 + 27);
  return Date.parse(`${iso.slice(0, 23)}Z`) + Number(iso.slice(23, 26)) / 1000;
}

function onFrames(c: Client, chunk: string, at: number) {
  const buf = c.buf + chunk;
  let from = 0;
  let idx: number;
  while ((idx = buf.indexOf('\n\n', from)) !== -1) {
    const frame = buf.slice(from, idx);
    from = idx + 2;
    if (!frame.startsWith('id: ')) continue;
    const seq = seqOf(frame.slice(4, frame.indexOf('\n')));
    if (seq === c.last) c.duplicates++;
    else if (seq < c.last) c.reordered++;
    else {
      if (c.last > 0 && seq !== c.last + 1) c.gaps += seq - c.last - 1;
      c.last = seq;
      c.received++;
      const ms = at - createdMs(frame);
      hist[Math.min(hist.length - 1, Math.max(0, Math.floor(ms / BUCKET_MS)))]++;
      if (ms > maxMs) maxMs = ms;
      samples++;
    }
  }
  c.buf = from === 0 ? buf : buf.slice(from);
}

function open(): Promise<void> {
  return new Promise((resolve) => {
    const c: Client = { last: 0, received: 0, duplicates: 0, gaps: 0, reordered: 0, buf: '' };
    const req = request(
      { hostname: url.hostname, port: url.port, path: url.pathname + url.search, headers, agent: false },
      (res: IncomingMessage) => {
        if (res.statusCode !== 200) {
          failed++;
          res.resume();
          resolve();
          return;
        }
        clients.push(c);
        clientsSockets.push(res);
        connected++;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => onFrames(c, chunk, now()));
        resolve();
      },
    );
    req.on('error', () => {
      failed++;
      resolve();
    });
    req.end();
  });
}

// Connect in waves so the listen backlog never overflows.
for (let i = 0; i < n; i += 200) await Promise.all(Array.from({ length: Math.min(200, n - i) }, open));
process.stdout.write(`clients connected ${connected} failed ${failed}\n`);

const started = Date.now();
const cpu0 = process.cpuUsage();
await new Promise<void>((resolve) => {
  const t = setInterval(() => {
    if (clients.every((c) => c.received >= expect) || Date.now() - started > timeoutMs) {
      clearInterval(t);
      resolve();
    }
  }, 50);
});

const cpu = process.cpuUsage(cpu0);
const sum = (f: (c: Client) => number) => clients.reduce((s, c) => s + f(c), 0);
const result = {
  connected,
  failed,
  expected_per_client: expect,
  received: sum((c) => c.received),
  missing: sum((c) => Math.max(0, expect - c.received)),
  duplicates: sum((c) => c.duplicates),
  gaps: sum((c) => c.gaps),
  reordered: sum((c) => c.reordered),
  samples,
  /** Share of one core this process used while events flowed (its parsing competes with the server). */
  cpu_pct: Math.round(((cpu.user + cpu.system) / 1000 / (Date.now() - started)) * 1000) / 10,
  max_ms: maxMs,
  bucket_ms: BUCKET_MS,
  // Sparse histogram: [bucket, count] pairs.
  hist: [...hist.entries()].filter(([, v]) => v > 0),
};
process.stdout.write(`clients done ${JSON.stringify(result)}\n`);
// Stay up until the bench kills us: exiting now could let the parent see the exit before it
// has read the whole line from the pipe.
for (const c of clientsSockets) c.destroy();
setInterval(() => undefined, 60_000);

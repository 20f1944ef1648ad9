import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { SCOPES } from '../../src/auth/scopes.js';
import { redisReady } from '../../src/availability.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { startWeb, type WebServer } from '../../src/web.js';
import { createTestEnv, type TestEnv } from '../helpers/stack.js';

const HEADERS_TIMEOUT_MS = 1000;
const REQUEST_TIMEOUT_MS = 1500;
const KEEP_ALIVE_TIMEOUT_MS = 700;

// Built by hand rather than with startTestStack, to capture the service's log lines.
let t: TestEnv, deps: Deps, web: WebServer;
let apiKey: string, appId: string;
const logLines: { level: number; msg: string; req?: { url?: string } }[] = [];
const logWaiters: { match: (l: (typeof logLines)[number]) => boolean; resolve: (l: (typeof logLines)[number]) => void }[] = [];

beforeAll(async () => {
  t = await createTestEnv({
    HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
    HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
    HTTP_KEEP_ALIVE_TIMEOUT_MS: String(KEEP_ALIVE_TIMEOUT_MS),
    STREAM_KEEPALIVE_MS: '200',
    LOG_LEVEL: 'info',
  });
  // The service's log lines, kept as objects so a test can wait for one.
  const logger = pino(
    { level: 'info' },
    {
      write(line: string) {
        const l = JSON.parse(line);
        logLines.push(l);
        for (const w of [...logWaiters])
          if (w.match(l)) {
            logWaiters.splice(logWaiters.indexOf(w), 1);
            w.resolve(l);
          }
      },
    },
  );
  deps = createDeps(t.config, { logger });
  await redisReady(deps.redis, 5_000);
  web = await startWeb(deps, 0);
  ({ apiKey, appId } = await createApplication(deps.sql, 'timeouts', [...SCOPES]));
});
afterAll(async () => {
  await web?.close();
  if (deps) await closeDeps(deps);
  await t?.dropDatabase();
});

/** Rejects after `ms`: a guard so a server that never acts fails the test instead of hanging it. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p,
    new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms))).finally(() =>
      clearTimeout(timer),
    ),
  ]);
}

const waitForLog = (match: (l: (typeof logLines)[number]) => boolean) => {
  const found = logLines.find(match);
  return found ? Promise.resolve(found) : new Promise<(typeof logLines)[number]>((resolve) => logWaiters.push({ match, resolve }));
};

async function rawSocket(): Promise<{ sock: Socket; received: () => string; closed: Promise<number> }> {
  const sock = connect(web.port, '127.0.0.1');
  sock.on('error', () => undefined);
  await once(sock, 'connect');
  let text = '';
  sock.on('data', (d) => (text += d.toString()));
  const closed = new Promise<number>((resolve) => sock.once('close', () => resolve(performance.now())));
  return { sock, received: () => text, closed };
}

describe('web server timeouts', () => {
  it('cuts a client that trickles its headers after headersTimeout, with 408', async () => {
    const { sock, received, closed } = await rawSocket();
    const started = performance.now();
    sock.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    // A slowloris client: one more header line every 100 ms, never the blank line that ends them.
    let lines = 0;
    const trickle = setInterval(() => {
      if (lines++ < 300 && !sock.destroyed) sock.write(`X-Slow-${lines}: 1\r\n`);
    }, 100);
    try {
      const at = await within(closed, 15_000, 'closing the slow-headers connection');
      expect(received()).toMatch(/^HTTP\/1\.1 408/);
      expect(at - started).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 100);
    } finally {
      clearInterval(trickle);
      sock.destroy();
    }
  });

  it('cuts a request whose body has not arrived within requestTimeout, with 408', async () => {
    const { sock, received, closed } = await rawSocket();
    const started = performance.now();
    sock.write(
      `POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${apiKey}\r\nX-Service-App-ID: ${appId}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"type":`,
    );
    try {
      const at = await within(closed, 15_000, 'closing the slow-body connection');
      expect(received()).toMatch(/^HTTP\/1\.1 408/);
      expect(at - started).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 100);
    } finally {
      sock.destroy();
    }
  });

  it('closes an idle kept-alive connection after keepAliveTimeout', async () => {
    const { sock, received, closed } = await rawSocket();
    sock.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    try {
      await within(once(sock, 'data'), 5_000, 'the answer');
      const answered = performance.now();
      expect(received()).toMatch(/^HTTP\/1\.1 200/);
      const at = await within(closed, 15_000, 'closing the idle connection');
      expect(at - answered).toBeGreaterThanOrEqual(KEEP_ALIVE_TIMEOUT_MS - 100);
    } finally {
      sock.destroy();
    }
  });

  const SUBSCRIPTION = JSON.stringify({ query: 'subscription { eventStream { id eventType } }' });
  it.each([
    [
      'an SSE event stream',
      () =>
        `GET /events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nAuthorization: Bearer ${apiKey}\r\nX-Service-App-ID: ${appId}\r\n\r\n`,
    ],
    [
      'a GraphQL subscription over SSE',
      () =>
        `POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(SUBSCRIPTION)}\r\n` +
        `Authorization: Bearer ${apiKey}\r\nX-Service-App-ID: ${appId}\r\n\r\n${SUBSCRIPTION}`,
    ],
  ])('keeps %s open well past requestTimeout (it bounds receiving the request, not the response)', async (_name, request) => {
    const { sock, received, closed } = await rawSocket();
    sock.write(request());
    try {
      await within(once(sock, 'data'), 5_000, 'the stream to open');
      const opened = performance.now();
      // The stream must still be open after three request timeouts: the close event must not come.
      const outcome = await Promise.race([
        closed.then(() => 'closed'),
        new Promise((r) => setTimeout(() => r('open'), 3 * REQUEST_TIMEOUT_MS)),
      ]);
      expect(outcome).toBe('open');
      expect(performance.now() - opened).toBeGreaterThanOrEqual(3 * REQUEST_TIMEOUT_MS - 50);
      expect(received()).toMatch(/^HTTP\/1\.1 200/);
      expect(received()).toContain('text/event-stream');
    } finally {
      sock.destroy();
    }
  });

  it('logs a client that disconnects from a stream at info, not error', async () => {
    const { sock } = await rawSocket();
    sock.write(
      `GET /events/stream?eventTypes=* HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nAuthorization: Bearer ${apiKey}\r\nX-Service-App-ID: ${appId}\r\n\r\n`,
    );
    await within(once(sock, 'data'), 5_000, 'the stream to open');
    sock.destroy();
    const line = await within(
      waitForLog((l) => l.msg === 'request aborted' && l.req?.url === '/events/stream'),
      10_000,
      'the disconnect log line',
    );
    expect(line.level).toBe(30);
    expect(
      logLines.filter((l) => l.level >= 50),
      JSON.stringify(logLines.filter((l) => l.level >= 50)),
    ).toEqual([]);
  });
});

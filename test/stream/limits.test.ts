import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSse, take } from '../helpers/sse.js';
import { startTestStack, type TestStack } from '../helpers/stack.js';
import { commit, parse, stream, until } from './helpers.js';

let short: TestStack;
let capped: TestStack;

beforeAll(async () => {
  [short, capped] = await Promise.all([
    startTestStack({ workers: false, env: { STREAM_KEEPALIVE_MS: '100', STREAM_MAX_MS: '1500' } }),
    // undici may leave a connection open that never sent a request; don't wait long for it on close.
    startTestStack({ workers: false, env: { STREAM_MAX_PER_APP: '2', STREAM_BUFFER_BYTES: '65536', SHUTDOWN_TIMEOUT_MS: '1000' } }),
  ]);
});
afterAll(() => Promise.all([short.close(), capped.close()]));

const openStreams = async (s: TestStack) => {
  const text = await (await fetch(`${s.base}/metrics`)).text();
  return Number(/^stream_clients (\d+)/m.exec(text)?.[1]);
};

describe('stream limits', () => {
  it('sends `: keep-alive` comments every STREAM_KEEPALIVE_MS and ends the stream cleanly after STREAM_MAX_MS', async () => {
    const app = await short.createApp();
    const t0 = Date.now();
    const c = await stream(short.base, app);
    expect(await c.ended).toBe('end');
    const elapsed = Date.now() - t0;
    expect(elapsed).toBeGreaterThanOrEqual(1400);
    expect(elapsed).toBeLessThan(5000);
    expect(c.comments.filter((x) => x === 'keep-alive').length).toBeGreaterThanOrEqual(5);
  });

  it('caps concurrent streams per application with a JSON 429, frees the slot on disconnect and leaves other applications alone', async () => {
    const app = await capped.createApp();
    const other = await capped.createApp();
    const s1 = await stream(capped.base, app);
    const s2 = await stream(capped.base, app);
    expect([s1.status, s2.status]).toEqual([200, 200]);
    const s3 = await stream(capped.base, app);
    expect(s3.status).toBe(429);
    expect(s3.headers.get('content-type')).toMatch(/application\/json/);
    expect(JSON.parse(s3.text!).error.code).toBe('TOO_MANY_STREAMS');
    expect(s3.headers.get('retry-after')).toBeTruthy();

    const o = await stream(capped.base, other);
    expect(o.status).toBe(200);
    o.close();

    s1.close();
    let s4 = await stream(capped.base, app);
    await until(
      async () => {
        if (s4.status === 200) return true;
        s4 = await stream(capped.base, app);
        return s4.status === 200;
      },
      5000,
      'the released slot to be reusable',
    );
    s2.close();
    s4.close();
  });

  it('disconnects a client that stops reading once its buffer passes STREAM_BUFFER_BYTES, without holding back others; it resumes by cursor', async () => {
    const app = await capped.createApp();
    const [start] = await commit(capped.deps, app.appId, [{ event_type: 'start' }]);
    const startCursor = (await capped.request('GET', `/v1/events/${start}`, { auth: app })).json.cursor;
    const before = await openStreams(capped);

    // A client that sends its request and then never reads.
    const slow = connect(capped.web.port, '127.0.0.1');
    await new Promise<void>((r) => slow.once('connect', () => r()));
    slow.write(`GET /events/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${app.apiKey}\r\nLast-Event-ID: ${startCursor}\r\n\r\n`);
    slow.pause();
    const fast = await stream(capped.base, app, '', { headers: { 'Last-Event-ID': startCursor } });
    await until(async () => (await openStreams(capped)) === before + 2, 5000, 'both streams to open');

    const big = 'x'.repeat(100_000);
    const ids: string[] = [];
    for (let k = 0; k < 8; k++)
      ids.push(
        ...(await commit(
          capped.deps,
          app.appId,
          Array.from({ length: 10 }, (_, i) => ({ payload: { k, i, big } })),
        )),
      );
    const got = await take(fast, ids.length, 20_000);
    expect(got.map((f) => parse(f).id)).toEqual(ids);

    // The server gave up on the slow one (the fast one is still open).
    await until(async () => (await openStreams(capped)) === before + 1, 10_000, 'the slow stream to be dropped');
    const [after] = await commit(capped.deps, app.appId, [{ event_type: 'after.drop' }]);
    expect(parse((await take(fast, 1))[0]).id).toBe(after);

    // What the slow client did receive is a prefix; resuming from its last complete frame yields exactly the rest.
    let raw = '';
    slow.setEncoding('utf8');
    slow.on('data', (d: string) => (raw += d));
    slow.resume();
    await new Promise<void>((r) => slow.once('close', () => r()));
    const frames = raw
      .split('\n\n')
      .slice(0, -1)
      .map((b) => /^id: (.+)$/m.exec(b)?.[1])
      .filter((x): x is string => Boolean(x));
    expect(frames.length).toBeLessThan(ids.length);
    const lastId = frames.at(-1) ?? startCursor;
    const resumed = await stream(capped.base, app, '', { headers: { 'Last-Event-ID': lastId } });
    const rest = await take(resumed, ids.length - frames.length + 1, 20_000);
    expect(rest.map((f) => parse(f).id)).toEqual([...ids.slice(frames.length), after]);
    resumed.close();
    fast.close();
  });

  it('ends open streams on graceful shutdown so clients reconnect elsewhere with their cursor', async () => {
    const s = await startTestStack({ workers: false });
    try {
      const app = await s.createApp();
      const [id] = await commit(s.deps, app.appId, [{}]);
      const c = await stream(s.base, app);
      expect(parse((await take(c, 1))[0]).id).toBe(id);
      const sub = await openSse(`${s.base}/`, {
        method: 'POST',
        headers: { ...app.headers, 'Content-Type': 'application/json' },
        body: JSON.stringify({ query: 'subscription { eventStream { id } }' }),
      });
      expect(sub.status).toBe(200);
      await until(async () => (await openStreams(s)) === 2, 5000, 'both streams to open');
      const t0 = Date.now();
      const closing = s.web.close();
      expect(await c.ended).toBe('end');
      await closing;
      // The subscription is completed (graphql-sse `complete`), not cut.
      expect((await sub.next())?.event).toBe('complete');
      expect(await sub.ended).toBe('end');
      expect(Date.now() - t0).toBeLessThan(s.config.SHUTDOWN_TIMEOUT_MS);
    } finally {
      await s.close();
    }
  });
});

import { queueFor } from '../../src/queues.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTelegramFake, type TelegramFake } from '../../chaos/fakes.js';
import { networkFailure } from '../../src/platforms/http-errors.js';
import { connect } from '../helpers/connections.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

/**
 * A platform that reads a send and never answers may have delivered it. Calling it again
 * after the timeout is how one message reached a silent platform 8 times: the send must
 * settle as DELIVERY_UNCERTAIN after one call, and the client decides.
 */
let s: TestStack;
let a: AppCredentials;
let tg: TelegramFake;
let conn: { id: string };

beforeAll(async () => {
  tg = await startTelegramFake();
  s = await startTestStack({ workers: ['send', 'ledger'], env: { SEND_WAIT_MS: '50', PLATFORM_TIMEOUT_MS: '300' } });
  a = await s.createApp();
  conn = await connect(s, a, 'TELEGRAM', { bot_token: '777003:silent-bot_abcdef', api_base_url: tg.base });
});
afterAll(async () => {
  await s?.close();
  await tg?.stop();
});

async function until<T>(f: () => Promise<T | undefined>, what: string, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('a platform that never answers', () => {
  it('gets one call: the send fails as DELIVERY_UNCERTAIN instead of being repeated', async () => {
    tg.silence(60_000);
    const r = await s.request('POST', '/v1/messages', {
      auth: a,
      body: { platform_connection_id: conn.id, to_external_id: '6001', message: 'said into the void' },
    });
    expect(r.status, r.text).toBe(202);
    const id = r.json.id as string;
    const settled = await until(async () => {
      const [m] = await s.deps.sql<{ status: string; attempts: number; error: { code: string } | null }[]>`
        SELECT status, attempts, error FROM outbound_messages WHERE id = ${id}`;
      return m?.status === 'failed' || m?.status === 'sent' ? m : undefined;
    }, 'the message to settle');
    expect(settled).toMatchObject({ status: 'failed', error: { code: 'DELIVERY_UNCERTAIN' } });
    // Whatever retry schedule the queue has, nothing is left to call the platform again.
    // The row settles inside the job, which finishes a moment later: wait for that, then look.
    const state = await until(async () => {
      const job = await queueFor(s.deps.queues, 'send').getJob(`send-${id}`);
      const st = job ? await job.getState() : 'gone';
      return st === 'active' ? undefined : st;
    }, 'the send job to finish');
    expect(state).not.toMatch(/delayed|waiting|active/);
    expect(tg.heard.get('said into the void')).toBe(1);
    const [event] = await until(async () => {
      const e = await s.deps.sql<{ payload: Record<string, unknown> }[]>`
        SELECT payload FROM events WHERE app_id = ${a.appId} AND event_type = 'message.status' AND payload->>'message_id' = ${id}`;
      return e.length ? e : undefined;
    }, 'the message.status event');
    expect(event.payload).toMatchObject({ status: 'failed', error: { code: 'DELIVERY_UNCERTAIN' } });
    const rest = await s.request('GET', `/v1/messages/${id}`, { auth: a });
    expect(rest.json).toMatchObject({ status: 'failed', error: { code: 'DELIVERY_UNCERTAIN' } });
  });
});

describe('which network failures may have delivered', () => {
  it('retries a call that never reached the platform', () => {
    for (const code of ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']) {
      expect(networkFailure('Telegram', Object.assign(new Error(code), { code })), code).toMatchObject({
        code: 'PLATFORM_UNAVAILABLE',
        retryable: true,
      });
    }
  });
  it('does not retry a call the platform may have read', () => {
    const timeout = Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' });
    for (const err of [
      timeout,
      Object.assign(new Error('h'), { code: 'UND_ERR_HEADERS_TIMEOUT' }),
      Object.assign(new Error('s'), { code: 'UND_ERR_SOCKET' }),
      Object.assign(new Error('r'), { code: 'ECONNRESET' }),
    ]) {
      expect(networkFailure('Telegram', err)).toMatchObject({ code: 'DELIVERY_UNCERTAIN', retryable: false });
    }
  });
});

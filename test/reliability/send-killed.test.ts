import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTelegramFake, type TelegramFake } from '../../chaos/fakes.js';
import { startWorkers } from '../../workers/index.js';
import { connect, eventually } from '../helpers/connections.js';
import { spawnService, startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

/**
 * A worker process killed (SIGKILL) after it claimed a batch's message and while the platform
 * call is in flight: the platform may have the message, so the worker that takes over must not
 * call again. It waits out the dead owner's lease and fails the message as DELIVERY_UNCERTAIN.
 */
let s: TestStack;
let a: AppCredentials;
let tg: TelegramFake;
let conn: { id: string };

beforeAll(async () => {
  tg = await startTelegramFake();
  // Short bounds so the dead worker's job and claim lapse quickly: lock 2 s, lease 2 × 1 s + 5 s.
  s = await startTestStack({ workers: false, env: { SEND_WAIT_MS: '0', PLATFORM_TIMEOUT_MS: '1000', JOB_LOCK_MS: '2000' } });
  a = await s.createApp();
  conn = await connect(s, a, 'TELEGRAM', { bot_token: '777012:killed-bot_abcdef', api_base_url: tg.base });
});
afterAll(async () => {
  await s?.close();
  await tg?.stop();
});

describe('a worker killed between the claim and the platform answer', () => {
  it('leaves a message no other worker sends again: it fails as DELIVERY_UNCERTAIN after the lease', async () => {
    const worker = spawnService('workers/index.ts', { ...s.env, WORKER_QUEUES: 'send,ledger', LOG_LEVEL: 'info' });
    await worker.waitFor(/workers started/);
    tg.onAccept = async (text) => {
      if (text !== 'killed mid-call') return;
      worker.kill('SIGKILL');
      await worker.exited;
    };
    let takeover: Awaited<ReturnType<typeof startWorkers>> | undefined;
    try {
      const r = await s.request('POST', '/v1/messages', {
        auth: a,
        body: { platform_connection_id: conn.id, to_external_id: '9001', message: 'killed mid-call' },
      });
      expect(r.status, r.text).toBe(202);
      const id = r.json.id as string;
      await worker.exited;
      const [claimed] = await s.deps.sql<{ status: string; claimed_by: string | null }[]>`
        SELECT status, claimed_by FROM outbound_messages WHERE id = ${id}`;
      expect(claimed).toMatchObject({ status: 'sending', claimed_by: expect.any(String) });

      takeover = startWorkers(s.deps, ['send', 'ledger']);
      const settled = await eventually(
        async () => {
          const [m] = await s.deps.sql<{ status: string; error: { code: string } | null }[]>`
            SELECT status, error FROM outbound_messages WHERE id = ${id}`;
          return m.status === 'sent' || m.status === 'failed' ? m : undefined;
        },
        30_000,
        'the message to settle',
      );
      expect(settled).toMatchObject({ status: 'failed', error: { code: 'DELIVERY_UNCERTAIN' } });
      const [event] = await eventually(async () => {
        const e = await s.deps.sql<{ payload: Record<string, unknown> }[]>`
          SELECT payload FROM events WHERE app_id = ${a.appId} AND event_type = 'message.status' AND payload->>'message_id' = ${id}`;
        return e.length ? e : undefined;
      });
      expect(event.payload).toMatchObject({ status: 'failed', error: { code: 'DELIVERY_UNCERTAIN' } });
      expect(tg.accepted.get('killed mid-call')).toBe(1);
    } finally {
      tg.onAccept = undefined;
      worker.kill('SIGKILL');
      await takeover?.close();
    }
  }, 90_000);
});

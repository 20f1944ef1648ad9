import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTelegramFake, type TelegramFake } from '../../chaos/fakes.js';
import { startWorkers } from '../../workers/index.js';
import { connect } from '../helpers/connections.js';
import { ADMIN_URL } from '../helpers/db.js';
import { startTestStack, type AppCredentials, type TestStack } from '../helpers/stack.js';

/**
 * A send has one side effect outside the service (the platform's copy of the message), so a
 * crash or an outage around the platform call must never make a retry send it twice.
 */
let s: TestStack;
let a: AppCredentials;
let tg: TelegramFake;
let conn: { id: string };

beforeAll(async () => {
  tg = await startTelegramFake();
  // No worker yet: each test decides what state the job finds.
  s = await startTestStack({ workers: false, env: { SEND_WAIT_MS: '50' } });
  a = await s.createApp();
  conn = await connect(s, a, 'TELEGRAM', { bot_token: '777002:interrupted-bot_abcdef', api_base_url: tg.base });
});
afterAll(async () => {
  await s.close();
  await tg.stop();
});

async function until<T>(f: () => Promise<T | undefined>, what: string, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
const queue = async (to: string, text: string) => {
  const r = await s.request('POST', '/v1/messages', {
    auth: a,
    body: { platform_connection_id: conn.id, to_external_id: to, message: text },
  });
  expect(r.status, r.text).toBe(202);
  return r.json.id as string;
};
const settled = (id: string) =>
  until(async () => {
    const [m] = await s.deps.sql<
      { status: string; error: { code: string } | null }[]
    >`SELECT status, error FROM outbound_messages WHERE id = ${id}`;
    return m && (m.status === 'sent' || m.status === 'failed') ? m : undefined;
  }, `message ${id} to settle`);

describe('an interrupted send', () => {
  it('is not sent again: it fails as DELIVERY_UNCERTAIN and message.status failed says so', async () => {
    const id = await queue('5001', 'maybe delivered');
    // What a worker killed during the platform call leaves behind.
    await s.deps.sql`UPDATE outbound_messages SET status = 'sending', attempts = 1 WHERE id = ${id}`;
    const worker = startWorkers(s.deps, ['send', 'ledger']);
    try {
      expect(await settled(id)).toMatchObject({ status: 'failed', error: { code: 'DELIVERY_UNCERTAIN' } });
      expect(tg.accepted.get('maybe delivered')).toBeUndefined();
      const event = await until(async () => {
        const [ev] = await s.deps.sql<{ payload: Record<string, unknown> }[]>`
          SELECT payload FROM events WHERE app_id = ${a.appId} AND event_type = 'message.status' AND payload->>'message_id' = ${id}`;
        return ev;
      }, 'the message.status event');
      expect(event.payload).toMatchObject({ status: 'failed', error: { code: 'DELIVERY_UNCERTAIN' } });
      const rest = await s.request('GET', `/v1/messages/${id}`, { auth: a });
      expect(rest.json).toMatchObject({ status: 'failed', error: { code: 'DELIVERY_UNCERTAIN' } });
    } finally {
      await worker.close();
    }
  });

  it('is recorded as sent, once, when the database closes right as the platform accepts it', async () => {
    const id = await queue('5002', 'accepted during an outage');
    const dbName = new URL(s.env.DATABASE_URL).pathname.slice(1);
    const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
    tg.onAccept = async () => {
      tg.onAccept = undefined;
      await admin.unsafe(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS false`);
      await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${dbName} AND pid <> pg_backend_pid()`;
      setTimeout(() => void admin.unsafe(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS true`).catch(() => {}), 1500);
    };
    const worker = startWorkers(s.deps, ['send', 'ledger']);
    try {
      expect(await settled(id)).toMatchObject({ status: 'sent' });
      expect(tg.accepted.get('accepted during an outage')).toBe(1);
    } finally {
      await worker.close();
      await admin.unsafe(`ALTER DATABASE "${dbName}" ALLOW_CONNECTIONS true`);
      await admin.end();
    }
  });
});

import { randomUUID } from 'node:crypto';
import { QueueEvents } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { pruneFiles, storeFile } from '../../src/files/files.js';
import { createS3Store } from '../../src/files/storage.js';
import { pruneIdempotencyKeys } from '../../src/idempotency.js';
import { pruneLinkCodes } from '../../src/identity/link-codes.js';
import { pruneMessages } from '../../src/messages/messages.js';
import { prunePortalSessions } from '../../src/portal/sessions.js';
import { enqueue, MAINTENANCE_TASKS, queuePrefix, queueFor } from '../../src/queues.js';
import { deleteInBatches } from '../../src/retention/batched-delete.js';
import { createRedis, type Redis } from '../../src/redis.js';
import { purgeOldLogs } from '../../src/webhooks/attempt-log.js';
import { startWorkerHost, type WorkerHost } from '../../workers/host.js';
import { maintenanceProcessor } from '../../workers/maintenance.js';
import { S3Fake } from '../fakes/s3.js';
import { createTestEnv, type TestEnv } from '../helpers/stack.js';

let t: TestEnv;
let deps: Deps;
let appId: string;

beforeAll(async () => {
  t = await createTestEnv();
  deps = createDeps(t.config);
  ({ appId } = await createApplication(deps.sql, 'retention', ['admin']));
});
afterAll(async () => {
  await closeDeps(deps);
  await t.dropDatabase();
});

const count = async (table: string, ids: string[]) =>
  (await deps.sql<{ id: string }[]>`SELECT id::text FROM ${deps.sql(table)} WHERE id = ANY(${ids}::uuid[])`).map((r) => r.id).sort();

async function connection(): Promise<string> {
  const [{ id }] = await deps.sql<{ id: string }[]>`
    INSERT INTO platform_connections (app_id, platform, name, config_sealed, webhook_secret_sealed)
    VALUES (${appId}, 'TELEGRAM', 'c', 'x', 'x') RETURNING id`;
  return id;
}

async function message(connectionId: string, m: { status: string; finishedDaysAgo?: number; fileIds?: string[] }): Promise<string> {
  const id = randomUUID();
  await deps.sql`
    INSERT INTO outbound_messages (id, app_id, platform_connection_id, to_external_id, recipient_seq, text, file_ids, status, finished_at)
    VALUES (${id}, ${appId}, ${connectionId}, '42', 1, 'hi', ${m.fileIds ?? []}, ${m.status},
            ${m.finishedDaysAgo === undefined ? null : deps.sql`now() - ${m.finishedDaysAgo} * interval '1 day'`})`;
  return id;
}

describe('deleteInBatches', () => {
  it('repeats bounded chunks until one comes back short', async () => {
    const chunks: number[] = [];
    let left = 12;
    const total = await deleteInBatches(async (limit) => {
      const n = Math.min(limit, left);
      left -= n;
      chunks.push(n);
      return n;
    }, 5);
    expect(total).toBe(12);
    expect(chunks).toEqual([5, 5, 2]);
  });
});

describe('idempotency_keys', () => {
  it('drops keys past the retention and keeps younger ones', async () => {
    const insert = (key: string, hoursAgo: number) => deps.sql`
      INSERT INTO idempotency_keys (app_id, scope, key, request_hash, resource_id, created_at)
      VALUES (${appId}, 'events', ${key}, '\\x00', ${randomUUID()}, now() - ${hoursAgo} * interval '1 hour')`;
    await insert('old', 49);
    await insert('day-old', 30);
    await insert('fresh', 1);
    expect(await pruneIdempotencyKeys(deps.sql, 48)).toBe(1);
    const left = await deps.sql<{ key: string }[]>`SELECT key FROM idempotency_keys WHERE app_id = ${appId} ORDER BY key`;
    expect(left.map((r) => r.key)).toEqual(['day-old', 'fresh']);
  });

  it('never drops a key inside the 24 hours it answers replays, whatever the setting', async () => {
    await deps.sql`
      INSERT INTO idempotency_keys (app_id, scope, key, request_hash, resource_id, created_at)
      VALUES (${appId}, 'messages', 'young', '\\x00', ${randomUUID()}, now() - interval '23 hours')`;
    await pruneIdempotencyKeys(deps.sql, 1);
    expect(await deps.sql`SELECT 1 FROM idempotency_keys WHERE app_id = ${appId} AND key = 'young'`).toHaveLength(1);
  });
});

describe('link_codes', () => {
  it('drops codes expired longer than the retention and keeps live and recently expired ones', async () => {
    const [{ id: userId }] = await deps.sql<{ id: string }[]>`INSERT INTO users (app_id) VALUES (${appId}) RETURNING id`;
    const code = async (expiredDaysAgo: number) => {
      const [{ id }] = await deps.sql<{ id: string }[]>`
        INSERT INTO link_codes (app_id, code_hash, user_id, expires_at)
        VALUES (${appId}, ${Buffer.from(randomUUID())}, ${userId}, now() - ${expiredDaysAgo} * interval '1 day') RETURNING id`;
      return id;
    };
    const old = await code(8);
    const recent = await code(6);
    const live = await code(-1);
    expect(await pruneLinkCodes(deps.sql, 7)).toBe(1);
    expect(await count('link_codes', [old, recent, live])).toEqual([recent, live].sort());
  });
});

describe('portal_sessions', () => {
  it('drops links and sessions that ended longer ago than the retention and keeps live and recently ended ones', async () => {
    const row = async (o: { tokenDaysAgo: number; expiresDaysAgo?: number; revokedDaysAgo?: number }) => {
      const [{ id }] = await deps.sql<{ id: string }[]>`
        INSERT INTO portal_sessions (app_id, areas, scopes, token_expires_at, expires_at, revoked_at)
        VALUES (${appId}, ${['all']}, ${['admin']}, now() - ${o.tokenDaysAgo} * interval '1 day',
                ${o.expiresDaysAgo === undefined ? null : deps.sql`now() - ${o.expiresDaysAgo} * interval '1 day'`},
                ${o.revokedDaysAgo === undefined ? null : deps.sql`now() - ${o.revokedDaysAgo} * interval '1 day'`})
        RETURNING id`;
      return id;
    };
    const unusedLongAgo = await row({ tokenDaysAgo: 9 });
    const expiredLongAgo = await row({ tokenDaysAgo: 10, expiresDaysAgo: 9 });
    const revokedLongAgo = await row({ tokenDaysAgo: 10, expiresDaysAgo: -1, revokedDaysAgo: 8 });
    const unusedRecently = await row({ tokenDaysAgo: 1 });
    const live = await row({ tokenDaysAgo: 10, expiresDaysAgo: -1 });
    const revokedRecently = await row({ tokenDaysAgo: 10, expiresDaysAgo: 6, revokedDaysAgo: 6.5 });
    expect(await prunePortalSessions(deps.sql, 7)).toBe(3);
    const all = [unusedLongAgo, expiredLongAgo, revokedLongAgo, unusedRecently, live, revokedRecently];
    expect(await count('portal_sessions', all)).toEqual([unusedRecently, live, revokedRecently].sort());
  });
});

describe('outbound_messages', () => {
  it('drops messages settled longer ago than the retention and keeps recent and unsettled ones', async () => {
    const conn = await connection();
    const sentLongAgo = await message(conn, { status: 'sent', finishedDaysAgo: 40 });
    const failedLongAgo = await message(conn, { status: 'failed', finishedDaysAgo: 40 });
    const sentRecently = await message(conn, { status: 'sent', finishedDaysAgo: 2 });
    const queued = await message(conn, { status: 'queued' });
    expect(await pruneMessages(deps.sql, 30)).toBe(2);
    expect(await count('outbound_messages', [sentLongAgo, failedLongAgo, sentRecently, queued])).toEqual([sentRecently, queued].sort());
  });

  it('keeps every message when the retention is 0 (the default)', async () => {
    const conn = await connection();
    const old = await message(conn, { status: 'sent', finishedDaysAgo: 4000 });
    expect(await pruneMessages(deps.sql, 0)).toBe(0);
    expect(await count('outbound_messages', [old])).toEqual([old]);
  });
});

describe('files', () => {
  const file = async (daysAgo: number, store?: Parameters<typeof storeFile>[3]) => {
    const f = await storeFile(deps.sql, appId, { filename: 'a.txt', data: Buffer.from(randomUUID()) }, store);
    await deps.sql`UPDATE files SET created_at = now() - ${daysAgo} * interval '1 day' WHERE id = ${f.id}`;
    return f.id;
  };

  it('drops files older than the retention, keeps younger ones and those a queued message carries', async () => {
    const old = await file(100);
    const pinned = await file(100);
    const young = await file(10);
    const msg = await message(await connection(), { status: 'queued', fileIds: [pinned] });
    expect(await pruneFiles(deps.sql, 90)).toBe(1);
    expect(await count('files', [old, pinned, young])).toEqual([pinned, young].sort());
    // Once the message settles, its files age out like any other.
    await deps.sql`UPDATE outbound_messages SET status = 'sent', finished_at = now() WHERE id = ${msg}`;
    expect(await pruneFiles(deps.sql, 90)).toBe(1);
    expect(await count('files', [pinned])).toEqual([]);
  });

  it('keeps every file when the retention is 0 (the default)', async () => {
    const old = await file(4000);
    expect(await pruneFiles(deps.sql, 0)).toBe(0);
    expect(await count('files', [old])).toEqual([old]);
    await deps.sql`DELETE FROM files WHERE id = ${old}`;
  });

  it('deletes the S3 object of a pruned file and leaves the objects of kept ones', async () => {
    const s3 = await S3Fake.start('gw-retention', 'AKIATESTKEY');
    try {
      const store = createS3Store({
        S3_BUCKET: 'gw-retention',
        S3_REGION: 'us-east-1',
        S3_ENDPOINT: s3.url,
        S3_ACCESS_KEY_ID: 'AKIATESTKEY',
        S3_SECRET_ACCESS_KEY: 'secret',
        S3_FORCE_PATH_STYLE: true,
      });
      const old = await file(100, store);
      const young = await file(10, store);
      expect([...s3.objects.keys()].sort()).toEqual([`gw-retention/${appId}/${old}`, `gw-retention/${appId}/${young}`].sort());
      // Without the store an S3 file cannot lose its object, so it is not pruned either.
      expect(await pruneFiles(deps.sql, 90)).toBe(0);
      expect(await pruneFiles(deps.sql, 90, store)).toBe(1);
      expect([...s3.objects.keys()]).toEqual([`gw-retention/${appId}/${young}`]);
      expect(await count('files', [old, young])).toEqual([young]);
    } finally {
      await s3.close();
    }
  });
});

describe('webhook_delivery_logs and webhook_deliveries', () => {
  it('drop logs and settled deliveries past WEBHOOK_LOG_RETENTION_DAYS, keeping recent and unsettled ones', async () => {
    const [{ id: sub }] = await deps.sql<{ id: string }[]>`
      INSERT INTO webhook_subscriptions (app_id, name, target_url, event_patterns, secret_sealed)
      VALUES (${appId}, 's', 'https://example.com', '{*}', 'x') RETURNING id`;
    const delivery = async (status: string, daysAgo: number) => {
      const id = randomUUID();
      await deps.sql`
        INSERT INTO webhook_deliveries (id, app_id, subscription_id, event_id, event_type, status, body, updated_at)
        VALUES (${id}, ${appId}, ${sub}, ${randomUUID()}, 'x', ${status}, '{}', now() - ${daysAgo} * interval '1 day')`;
      return id;
    };
    const oldDelivered = await delivery('delivered', 31);
    const oldRetrying = await delivery('retrying', 31);
    const recent = await delivery('failed', 1);
    const log = async (daysAgo: number) => {
      const [{ id }] = await deps.sql<{ id: string }[]>`
        INSERT INTO webhook_delivery_logs (app_id, subscription_id, event_id, event_type, status, attempt_count, duration_ms, created_at)
        VALUES (${appId}, ${sub}, ${randomUUID()}, 'x', 'failed', 1, 1, now() - ${daysAgo} * interval '1 day') RETURNING id`;
      return id;
    };
    const oldLog = await log(31);
    const recentLog = await log(1);
    expect(await purgeOldLogs(deps)).toEqual({ logs: 1, deliveries: 1 });
    expect(await count('webhook_deliveries', [oldDelivered, oldRetrying, recent])).toEqual([oldRetrying, recent].sort());
    expect(await count('webhook_delivery_logs', [oldLog, recentLog])).toEqual([recentLog]);
  });
});

describe('the maintenance queue', () => {
  let host: WorkerHost;
  let events: QueueEvents;
  let eventsRedis: Redis;
  beforeAll(async () => {
    host = startWorkerHost(deps, [maintenanceProcessor]);
    eventsRedis = createRedis(t.config.REDIS_URL, 'blocking');
    events = new QueueEvents('maintenance', { connection: eventsRedis, prefix: queuePrefix(t.config.REDIS_PREFIX) });
    await events.waitUntilReady();
  });
  afterAll(async () => {
    await host.close();
    await events.close();
    eventsRedis.disconnect();
  });

  it('schedules every maintenance task when its worker starts', async () => {
    const expected = MAINTENANCE_TASKS.map((task) => `maintenance-${task}`).sort();
    let keys: string[] = [];
    // The worker upserts its schedulers as it starts, without being awaited.
    for (let i = 0; i < 100 && keys.length < expected.length; i++) {
      keys = (await queueFor(deps.queues, 'maintenance').getJobSchedulers()).map((s) => s.key).sort();
      if (keys.length < expected.length) await new Promise((r) => setTimeout(r, 50));
    }
    expect(keys).toEqual(expected);
  });

  it('prunes when a task runs as a job', async () => {
    await deps.sql`
      INSERT INTO idempotency_keys (app_id, scope, key, request_hash, resource_id, created_at)
      VALUES (${appId}, 'events', 'queued-prune', '\\x00', ${randomUUID()}, now() - interval '3 days')`;
    const job = await enqueue(deps.queues, 'maintenance', { task: 'prune-idempotency-keys' });
    await job.waitUntilFinished(events, 10_000);
    expect(await deps.sql`SELECT 1 FROM idempotency_keys WHERE key = 'queued-prune'`).toHaveLength(0);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplication } from '../../src/apps/applications.js';
import { closeDeps, createDeps, type Deps } from '../../src/deps.js';
import { createTestEnv, type TestEnv } from '../helpers/stack.js';

let t: TestEnv;
let deps: Deps;
let appId: string;
let userId: string;

// 100k users with a platform user each across 10 applications, and 100k conversations with a
// participant each: enough that the planner prefers indexes to scans.
beforeAll(async () => {
  t = await createTestEnv();
  deps = createDeps(t.config);
  const apps = await Promise.all(Array.from({ length: 10 }, (_, i) => createApplication(deps.sql, `idx-${i}`, ['users:read'])));
  const ids = apps.map((a) => a.appId);
  appId = ids[0];
  await deps.sql`
    INSERT INTO users (id, app_id, name, created_at)
    SELECT md5('u' || g)::uuid, (${ids}::uuid[])[1 + (g % 10)], 'Person ' || g, now() + g * interval '1 microsecond'
      FROM generate_series(1, 100000) g`;
  await deps.sql`
    INSERT INTO platform_users (id, app_id, user_id, platform, external_id, name)
    SELECT md5('p' || g)::uuid, (${ids}::uuid[])[1 + (g % 10)], md5('u' || g)::uuid, 'TELEGRAM', (1000000 + g)::text, 'Person ' || g
      FROM generate_series(1, 100000) g`;
  const [conn] = await deps.sql<{ id: string }[]>`
    INSERT INTO platform_connections (app_id, platform, name, config_sealed, webhook_secret_sealed)
    VALUES (${appId}, 'TELEGRAM', 'c', 'x', 'x') RETURNING id`;
  await deps.sql`
    INSERT INTO conversations (id, app_id, platform_connection_id, external_id, created_at)
    SELECT md5('c' || g)::uuid, ${appId}, ${conn.id}, g::text, now() + g * interval '1 microsecond' FROM generate_series(1, 100000) g`;
  await deps.sql`
    INSERT INTO conversation_participants (conversation_id, platform_user_id, app_id, first_seen_at, last_seen_at)
    SELECT md5('c' || g)::uuid, md5('p' || g)::uuid, ${appId}, now(), now() FROM generate_series(1, 100000) g`;
  userId = (await deps.sql<{ id: string }[]>`SELECT md5('u' || 10)::uuid AS id`)[0].id;
  for (const table of ['users', 'platform_users', 'conversations', 'conversation_participants']) await deps.sql.unsafe(`ANALYZE ${table}`);
}, 120_000);
afterAll(async () => {
  await closeDeps(deps);
  await t.dropDatabase();
});

async function plan(query: string): Promise<string> {
  const rows = await deps.sql.unsafe(`EXPLAIN ${query}`);
  return rows.map((r) => r['QUERY PLAN']).join('\n');
}

describe('identity reads are index-backed', () => {
  it('finds a user by platform and external id through platform_users(app_id, external_id)', async () => {
    const p = await plan(`SELECT u.id FROM users u WHERE u.app_id = '${appId}' AND u.merged_into IS NULL AND EXISTS (
      SELECT 1 FROM platform_users pu WHERE pu.user_id = u.id AND pu.app_id = '${appId}' AND pu.platform = 'TELEGRAM' AND pu.external_id = '1000010')
      ORDER BY u.created_at, u.id LIMIT 51`);
    expect(p).toMatch(/platform_users_external_idx/);
    expect(p).not.toMatch(/Seq Scan on (users|platform_users)/);
  });

  it('pages live users on users_live_idx', async () => {
    const p = await plan(`SELECT u.id FROM users u WHERE u.app_id = '${appId}' AND u.merged_into IS NULL AND NOT u.is_system
      AND (u.created_at, u.id) > (now(), '${userId}'::uuid) ORDER BY u.created_at, u.id LIMIT 51`);
    expect(p).toMatch(/users_live_idx/);
  });

  it('searches names through the trigram indexes', async () => {
    const p =
      await plan(`SELECT u.id FROM users u WHERE u.app_id = '${appId}' AND u.merged_into IS NULL AND (u.name ILIKE '%son 4242%' OR EXISTS (
      SELECT 1 FROM platform_users pu WHERE pu.user_id = u.id AND pu.app_id = '${appId}' AND pu.name ILIKE '%son 4242%')) ORDER BY u.created_at, u.id LIMIT 51`);
    expect(p).toMatch(/trgm/);
  });

  it("lists a user's conversations through its participants, not a scan of conversations", async () => {
    const p = await plan(`SELECT c.id FROM conversations c WHERE c.app_id = '${appId}' AND c.id IN (
      SELECT cp.conversation_id FROM conversation_participants cp WHERE cp.app_id = '${appId}'
         AND cp.platform_user_id IN (SELECT pu.id FROM platform_users pu WHERE pu.app_id = '${appId}' AND pu.user_id = '${userId}'))
      ORDER BY c.created_at, c.id LIMIT 51`);
    expect(p).toMatch(/conversation_participants_pu_idx/);
    expect(p).not.toMatch(/Seq Scan on (conversations|conversation_participants|platform_users)/);
  });
});

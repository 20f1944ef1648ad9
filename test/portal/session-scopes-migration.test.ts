import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/migrate.js';
import { databaseBefore } from '../helpers/migration-db.js';

const MIGRATION = '1700000000091_portal_session_scopes';
let db: Awaited<ReturnType<typeof databaseBefore>> | undefined;
afterAll(() => db?.drop());

describe('the portal-session scopes migration on sessions made before it', () => {
  it("gives each session its maker's scopes (every scope for the operator's), cut to what its areas use", async () => {
    const { url } = (db = await databaseBefore(MIGRATION));
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const [app] = await sql<{ id: string }[]>`INSERT INTO applications (name) VALUES ('a') RETURNING id`;
      const key = async (scopes: string[]) => {
        const [row] = await sql<{ id: string }[]>`
          INSERT INTO api_keys (app_id, key_hash, key_prefix, scopes)
          VALUES (${app.id}, ${randomBytes(32)}, 'gw_x', ${scopes}) RETURNING id`;
        return row.id;
      };
      const session = async (keyId: string | null, areas: string[]) => {
        const [row] = await sql<{ id: string }[]>`
          INSERT INTO portal_sessions (app_id, created_by_key_id, areas, token_expires_at)
          VALUES (${app.id}, ${keyId}, ${areas}, now() + interval '10 minutes') RETURNING id`;
        return row.id;
      };
      const adminOnly = await key(['admin']);
      const reader = await key(['events:read', 'admin']);
      const ids = {
        adminOnlyAll: await session(adminOnly, ['all']),
        readerAll: await session(reader, ['all']),
        readerWebhooks: await session(reader, ['webhooks']),
        operatorAll: await session(null, ['all']),
        operatorWebhooks: await session(null, ['webhooks']),
      };

      await migrate(url);

      const rows = await sql<{ id: string; scopes: string[] }[]>`SELECT id, scopes FROM portal_sessions`;
      const scopes = Object.fromEntries(Object.entries(ids).map(([k, id]) => [k, rows.find((r) => r.id === id)?.scopes]));
      expect(scopes).toEqual({
        adminOnlyAll: ['admin'],
        readerAll: ['events:read', 'admin'],
        readerWebhooks: ['admin'],
        operatorAll: ['events:read', 'events:write', 'users:read', 'users:write', 'admin'],
        operatorWebhooks: ['admin'],
      });
    } finally {
      await sql.end();
    }
  });
});

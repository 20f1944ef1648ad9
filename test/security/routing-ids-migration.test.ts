import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate } from '../../src/migrate.js';
import { databaseBefore } from '../helpers/migration-db.js';

const MIGRATION = '1700000000052_connection_routing_ids';
let db: Awaited<ReturnType<typeof databaseBefore>> | undefined;
afterAll(() => db?.drop());

describe('the routing-id migration on a database that already holds duplicates', () => {
  it('keeps the oldest connection as owner and disables the later duplicates, with the reason on their health', async () => {
    // The schema as it was before the migration…
    const { url } = (db = await databaseBefore(MIGRATION));
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const [a, b] = await sql<{ id: string }[]>`INSERT INTO applications (name) VALUES ('a'), ('b') RETURNING id`;
      // …where a second application connected the first's number and mailbox.
      const conn = async (app: string, platform: string, pub: Record<string, string>, ageMinutes: number) => {
        const [row] = await sql<{ id: string }[]>`
          INSERT INTO platform_connections (app_id, platform, name, config_sealed, config_public, webhook_secret_sealed, created_at)
          VALUES (${app}, ${platform}, 'x', 'sealed', ${sql.json(pub)}, 'sealed', now() - ${ageMinutes} * interval '1 minute') RETURNING id`;
        return row.id;
      };
      const waOwner = await conn(a.id, 'WHATSAPP', { phone_number_id: '111', business_account_id: '900' }, 10);
      const waCopy = await conn(b.id, 'WHATSAPP', { phone_number_id: '111', business_account_id: '900' }, 5);
      const waOther = await conn(b.id, 'WHATSAPP', { phone_number_id: '222', business_account_id: '900' }, 4);
      const mailOwner = await conn(a.id, 'EMAIL', { from: 'Help@Example.com' }, 10);
      const mailCopy = await conn(b.id, 'EMAIL', { from: 'Someone <help@example.com>' }, 1);

      await migrate(url);

      const claims = await sql<{ platform: string; routing_id: string; connection_id: string }[]>`
        SELECT platform, routing_id, connection_id FROM connection_routing_ids ORDER BY platform, routing_id`;
      expect(claims).toEqual([
        { platform: 'EMAIL', routing_id: 'help@example.com', connection_id: mailOwner },
        { platform: 'WHATSAPP', routing_id: '111', connection_id: waOwner },
        { platform: 'WHATSAPP', routing_id: '222', connection_id: waOther },
      ]);
      const rows = await sql<
        { id: string; status: string; last_error: string | null }[]
      >`SELECT id, status, last_error FROM platform_connections`;
      const byId = new Map(rows.map((r) => [r.id, r]));
      for (const id of [waOwner, waOther, mailOwner]) expect(byId.get(id)).toMatchObject({ status: 'ACTIVE', last_error: null });
      for (const id of [waCopy, mailCopy]) {
        expect(byId.get(id)?.status).toBe('DISABLED');
        expect(byId.get(id)?.last_error).toMatch(/older platform connection/);
      }
    } finally {
      await sql.end();
    }
  });
});

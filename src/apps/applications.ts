import type { Sql } from '../db.js';
import { createApiKey } from '../auth/api-keys.js';
import { OPERATOR, type Scope } from '../auth/scopes.js';
import { unwrap } from '../errors.js';

export interface Application {
  id: string;
  name: string;
  created_at: Date;
}

/** Creates an application with its first API key (shown once). */
export async function createApplication(
  sql: Sql,
  name: string,
  scopes: Scope[],
): Promise<{ appId: string; keyId: string; apiKey: string }> {
  const [app] = await sql<{ id: string }[]>`INSERT INTO applications (name) VALUES (${name}) RETURNING id`;
  // Only the operator creates applications; their first key is theirs to scope.
  const key = unwrap(await createApiKey(sql, OPERATOR, app.id, scopes));
  return { appId: app.id, ...key };
}

export async function listApplications(sql: Sql): Promise<(Application & { active_keys: number })[]> {
  return sql<(Application & { active_keys: number })[]>`
    SELECT a.id, a.name, a.created_at,
           (SELECT count(*)::int FROM api_keys k WHERE k.app_id = a.id AND k.revoked_at IS NULL) AS active_keys
    FROM applications a ORDER BY a.created_at, a.id`;
}

export async function applicationExists(sql: Sql, appId: string): Promise<boolean> {
  const [row] = await sql`SELECT 1 FROM applications WHERE id = ${appId}`;
  return Boolean(row);
}

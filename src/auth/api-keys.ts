import { createHash, randomBytes } from 'node:crypto';
import { bumpStamp, type ChangeStamps } from '../change-stamps.js';
import type { Sql } from '../db.js';
import { fail, ok, type Result } from '../errors.js';
import type { EventScope } from '../ledger/event-scope.js';
import { grantScopes, type Maker, type Scope } from './scopes.js';

/** Who is calling: the resolved key, its application and its scopes. */
export interface Principal {
  appId: string;
  /** The API key's id, or the portal session's: what an open stream is ended with when revoked. */
  keyId: string;
  scopes: Scope[];
  /** Set when a developer-portal session cookie (src/portal/auth.ts) authenticated the request. */
  portalSessionId?: string;
  /** When the credential stops working by itself (a portal session's end): open streams end then. */
  expiresAt?: Date;
  /** A scoped portal session's part of the ledger: every read, stream, subscription and replay it makes is confined to it. */
  eventScope?: EventScope;
}

const KEY_PREFIX = 'gw_';

function hashKey(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

/**
 * Creates a key of `appId` holding `requested`, if its maker holds them all (src/auth/scopes.ts:
 * no credential outranks its maker); the plain value is returned here once and never stored.
 */
export async function createApiKey(
  sql: Sql,
  maker: Maker,
  appId: string,
  requested: readonly Scope[],
): Promise<Result<{ keyId: string; apiKey: string; record: ApiKeyRecord }>> {
  const granted = grantScopes(maker, requested);
  if (!granted.ok) return granted;
  const scopes = granted.value;
  const apiKey = KEY_PREFIX + randomBytes(32).toString('base64url');
  const [row] = await sql<Pick<ApiKeyRecord, 'id' | 'key_prefix' | 'scopes' | 'created_at'>[]>`
    INSERT INTO api_keys (app_id, key_hash, key_prefix, scopes)
    VALUES (${appId}, ${hashKey(apiKey)}, ${apiKey.slice(0, 10)}, ${scopes})
    RETURNING id, key_prefix, scopes, created_at`;
  // A new key is neither used nor revoked (and the columns the first migrations had suffice:
  // applications are created on older schemas by the migration tests).
  return ok({ keyId: row.id, apiKey, record: { ...row, last_used_at: null, revoked_at: null } });
}

/**
 * Revokes a key (of `appId`, when given); false when no such live key exists. The api-keys
 * change stamp moves in the same statement, so every process stops accepting the key, and the
 * portal sessions it minted, on its next request.
 */
export async function revokeApiKey(sql: Sql, keyId: string, appId?: string): Promise<boolean> {
  if (!isUuid(keyId)) return false;
  const rows = await sql`
    WITH revoked AS (
      UPDATE api_keys SET revoked_at = now()
      WHERE id = ${keyId} AND revoked_at IS NULL ${appId === undefined ? sql`` : sql`AND app_id = ${appId}`} RETURNING id),
         stamp AS (${bumpStamp(sql, 'api-keys', 'revoked')})
    SELECT id FROM revoked`;
  return rows.length > 0;
}

export const isUuid = (s: string): boolean => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(s);

export interface Credentials {
  /** The `Authorization` header as received. */
  authorization?: string;
  /** The `X-Service-App-ID` header as received. */
  appId?: string;
}

type KeyRow = { id: string; app_id: string; scopes: Scope[]; usedMarkedAt?: number };

/** `last_used_at` is written at most this often per key and process: a write per request would cost more than the lookup it follows. */
const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * The one auth check, used by REST, GraphQL and the stream. Live keys are cached per process
 * under the api-keys change stamp (src/change-stamps.ts), so a revoked key stops working at
 * once in every process; unknown keys are never cached.
 */
export async function authenticate(
  sql: Sql,
  stamps: ChangeStamps,
  creds: Credentials,
  options: { appIdRequired: boolean },
): Promise<Result<Principal>> {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(creds.authorization ?? '');
  if (!match) return fail('UNAUTHORIZED', 'Missing or malformed Authorization header; expected "Bearer <API key>"');
  const appHeader = creds.appId?.trim();
  if (options.appIdRequired && !appHeader) return fail('UNAUTHORIZED', 'Missing X-Service-App-ID header');
  const hash = hashKey(match[1]);
  const lookup = async () => {
    const [found] = await sql<KeyRow[]>`SELECT id, app_id, scopes FROM api_keys WHERE key_hash = ${hash} AND revoked_at IS NULL`;
    return found;
  };
  const cache = stamps.cache<KeyRow | undefined>('api-keys');
  // An unknown key is not kept: it is looked up again each time, as it may have been created since.
  const row = await cache.get(hash.toString('base64'), lookup, (found) => found !== undefined);
  if (!row) return fail('UNAUTHORIZED', 'Invalid or revoked API key');
  if (appHeader && appHeader !== row.app_id) return fail('UNAUTHORIZED', 'X-Service-App-ID does not match the API key');
  if (!row.usedMarkedAt || Date.now() - row.usedMarkedAt >= LAST_USED_RESOLUTION_MS) {
    row.usedMarkedAt = Date.now();
    // Best effort, off the request's path: a lost mark only makes `last_used_at` older.
    sql`UPDATE api_keys SET last_used_at = now() WHERE id = ${row.id} AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`.catch(
      () => {},
    );
  }
  return ok({ appId: row.app_id, keyId: row.id, scopes: row.scopes });
}

/** A valid key without the scope an operation needs is a 403, not a 401. */
export function requireScope(principal: Principal, scope: Scope): Result<Principal> {
  if (principal.scopes.includes(scope)) return ok(principal);
  return fail('FORBIDDEN', `This API key lacks the "${scope}" scope`);
}

export interface ApiKeyRecord {
  id: string;
  key_prefix: string;
  scopes: Scope[];
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

/** An application's keys, live first and newest first; never the key values (only hashes are stored). */
export async function listApiKeys(sql: Sql, appId: string): Promise<ApiKeyRecord[]> {
  return sql<ApiKeyRecord[]>`
    SELECT id, key_prefix, scopes, created_at, last_used_at, revoked_at FROM api_keys
    WHERE app_id = ${appId} ORDER BY revoked_at IS NOT NULL, created_at DESC, id`;
}

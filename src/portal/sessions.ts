import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { isUuid } from '../auth/api-keys.js';
import { bumpStamp, type ChangeStamps } from '../change-stamps.js';
import type { Sql } from '../db.js';
import { fail, ok, type Result } from '../errors.js';
import { deleteInBatches } from '../retention/batched-delete.js';
import { grantScopes, type Maker, type Scope, scopeSchema, SCOPES } from '../auth/scopes.js';
import { type EventScope, eventScopeSchema, scopeFromStored, storedScope } from '../ledger/event-scope.js';
import { PORTAL_AREAS, portalAreaSchema, type PortalArea, scopesWithin } from './areas.js';

/** How long a browser session lasts after its sign-in link is exchanged: fixed, not sliding, so no request has to write. */
const SESSION_TTL_MS = 8 * 3600_000;
/** The session cookie's name. */
export const SESSION_COOKIE = 'gw_portal';
const TOKEN_PREFIX = 'gwp_';

const sha256 = (s: string): Buffer => createHash('sha256').update(s).digest();

/**
 * A return or logo URL: HTTPS, or plain HTTP to the local machine outside production (a
 * developer trying the embed on their own laptop).
 */
function embedUrl(production: boolean) {
  return z
    .url()
    .max(2000)
    .refine(
      (u) => {
        // zod runs the refinement even on a value its URL check refused.
        if (!URL.canParse(u)) return false;
        const url = new URL(u);
        if (url.protocol === 'https:') return true;
        return !production && url.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
      },
      production ? 'must be an https URL' : 'must be an https URL (or http on localhost)',
    );
}

const themeSchema = (production: boolean) =>
  z.strictObject({
    accent_color: z
      .string()
      .regex(/^#[0-9a-fA-F]{6}$/, 'a colour as #rrggbb')
      .optional(),
    logo_url: embedUrl(production).optional(),
  });
export type PortalTheme = z.infer<ReturnType<typeof themeSchema>>;

/** The body of POST /v1/portal/sessions. */
export const signInInput = (production: boolean) =>
  z.strictObject({
    areas: z.array(portalAreaSchema).min(1).max(PORTAL_AREAS.length).default(['all']),
    scopes: z
      .array(scopeSchema)
      .min(1)
      .max(SCOPES.length)
      .optional()
      .describe("the session's scopes, none beyond the caller's; default: the caller's, as far as the areas use them"),
    scope: eventScopeSchema
      .optional()
      .describe(
        'confine the session to these channels and/or event types (areas events and webhooks only): for embedding it for one of your customers',
      ),
    return_url: embedUrl(production).optional(),
    theme: themeSchema(production).optional(),
    expires_in_seconds: z.number().int().min(60).max(3600).default(600).describe('how long the sign-in link works'),
  });

export interface SignInRequest {
  appId: string;
  /** The key that minted the link; the session ends when it is revoked. Undefined from the operator CLI. */
  keyId?: string;
  areas: PortalArea[];
  /** The scopes asked for; default: all the maker's. */
  scopes?: readonly Scope[];
  /** The part of the ledger the session is confined to; none: the whole application's (for your own team). */
  eventScope?: EventScope;
  returnUrl?: string;
  theme?: PortalTheme;
  expiresInSeconds: number;
}

/**
 * Creates a one-time sign-in link's token; only its hash is stored. The session it opens holds
 * the scopes asked for, none beyond its maker's (src/auth/scopes.ts: no credential outranks
 * its maker), and of those only what its areas use.
 */
export async function createSignIn(
  sql: Sql,
  maker: Maker,
  input: SignInRequest,
): Promise<Result<{ id: string; token: string; expiresAt: Date; scopes: Scope[] }>> {
  const granted = grantScopes(maker, input.scopes ?? maker.scopes);
  if (!granted.ok) return granted;
  const areas = normaliseAreas(input.areas);
  const scopes = scopesWithin(areas, granted.value);
  if (!scopes.length)
    return fail('VALIDATION_ERROR', `None of these scopes is used in the ${areas.join(', ')} area`, [
      { path: ['scopes'], message: 'no scope the areas use' },
    ]);
  // The whole API cannot be confined (users, connections, keys, GraphQL): a scope opens only what can.
  if (input.eventScope && areas.includes('all'))
    return fail('VALIDATION_ERROR', 'A scoped session opens the events and webhooks areas only, not all', [
      { path: ['areas'], message: 'all cannot be confined to a scope' },
    ]);
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  const [row] = await sql<{ id: string; token_expires_at: Date }[]>`
    INSERT INTO portal_sessions (app_id, created_by_key_id, areas, scopes, event_scope, theme, return_url, token_hash, token_expires_at)
    VALUES (${input.appId}, ${input.keyId ?? null}, ${areas}, ${scopes}, ${input.eventScope ? sql.json(storedScope(input.eventScope)!) : null}, ${sql.json(input.theme ?? {})},
            ${input.returnUrl ?? null}, ${sha256(token)}, now() + ${input.expiresInSeconds} * interval '1 second')
    RETURNING id, token_expires_at`;
  return ok({ id: row.id, token, expiresAt: row.token_expires_at, scopes });
}

/** The sign-in URL the SPA opens: the token rides in the fragment, which browsers send to no server (logs, Referer). */
export const signInUrl = (publicBaseUrl: string, token: string) => `${publicBaseUrl}/portal/signin#token=${token}`;

/** What a session is, as the portal sees it: never the key, never the cookie's secret. */
export interface PortalSession {
  sessionId: string;
  appId: string;
  appName: string;
  areas: PortalArea[];
  /** What it may do: its maker's scopes (or fewer), within its areas. */
  scopes: Scope[];
  /** The part of the ledger it sees, when it was minted for one of the application's customers. */
  eventScope?: EventScope;
  theme: PortalTheme;
  returnUrl: string | null;
  expiresAt: Date;
}

type SessionRow = {
  id: string;
  app_id: string;
  app_name: string;
  areas: PortalArea[];
  scopes: Scope[];
  event_scope: { channels?: string[]; event_types?: string[] } | null;
  theme: PortalTheme;
  return_url: string | null;
  expires_at: Date;
};

const toSession = (r: SessionRow): PortalSession => ({
  sessionId: r.id,
  appId: r.app_id,
  appName: r.app_name,
  areas: r.areas,
  scopes: r.scopes,
  eventScope: scopeFromStored(r.event_scope),
  theme: r.theme,
  returnUrl: r.return_url,
  expiresAt: r.expires_at,
});

const REFUSED = 'This sign-in link is invalid, expired or already used; ask for a new one';

/**
 * Turns a sign-in token into a session, once: the one UPDATE both checks and consumes the
 * token, so two exchanges racing cannot both win. Returns the cookie's secret.
 */
export async function exchangeSignIn(sql: Sql, token: string): Promise<Result<{ session: PortalSession; secret: string }>> {
  if (!token.startsWith(TOKEN_PREFIX)) return fail('UNAUTHORIZED', REFUSED);
  const secret = randomBytes(32).toString('base64url');
  const [row] = await sql<SessionRow[]>`
    UPDATE portal_sessions s
    SET token_hash = NULL, session_hash = ${sha256(secret)}, exchanged_at = now(),
        expires_at = now() + ${SESSION_TTL_MS} * interval '1 millisecond'
    FROM applications a
    WHERE s.token_hash = ${sha256(token)} AND a.id = s.app_id
      AND s.token_expires_at > now() AND s.revoked_at IS NULL
      AND (s.created_by_key_id IS NULL OR EXISTS (SELECT 1 FROM api_keys k WHERE k.id = s.created_by_key_id AND k.revoked_at IS NULL))
    RETURNING s.id, s.app_id, a.name AS app_name, s.areas, s.scopes, s.event_scope, s.theme, s.return_url, s.expires_at`;
  if (!row) return fail('UNAUTHORIZED', REFUSED);
  return ok({ session: toSession(row), secret });
}

/**
 * The live session a cookie's secret names. Cached like API keys, under the same change stamp
 * (src/change-stamps.ts): revoking a session or the key that minted it moves that stamp in
 * the same statement, so every process stops accepting the cookie on its next request. Expiry
 * needs no stamp: it is checked against the cached row.
 */
export async function sessionBySecret(sql: Sql, stamps: ChangeStamps, secret: string): Promise<PortalSession | undefined> {
  const hash = sha256(secret);
  const lookup = async () => {
    const [row] = await sql<SessionRow[]>`
      SELECT s.id, s.app_id, a.name AS app_name, s.areas, s.scopes, s.event_scope, s.theme, s.return_url, s.expires_at
      FROM portal_sessions s JOIN applications a ON a.id = s.app_id
      WHERE s.session_hash = ${hash} AND s.revoked_at IS NULL AND s.expires_at > now()
        AND (s.created_by_key_id IS NULL OR EXISTS (SELECT 1 FROM api_keys k WHERE k.id = s.created_by_key_id AND k.revoked_at IS NULL))`;
    return row;
  };
  // The api-keys cache holds keys under their base64 hash; a session's entry is prefixed so the two never meet.
  const cache = stamps.cache<SessionRow | undefined>('api-keys');
  const row = await cache.get(`portal:${hash.toString('base64')}`, lookup, (found) => found !== undefined);
  if (!row || row.expires_at.getTime() <= Date.now()) return undefined;
  return toSession(row);
}

/**
 * The session's CSRF token, derived from the cookie's secret rather than stored: only a page
 * that was told it (the session answer) or holds the secret can present it.
 */
export const csrfToken = (secret: string): string => createHmac('sha256', secret).update('portal-csrf').digest('base64url');

export function csrfMatches(secret: string, presented: string | undefined): boolean {
  if (!presented) return false;
  const expected = Buffer.from(csrfToken(secret));
  const got = Buffer.from(presented);
  return got.length === expected.length && timingSafeEqual(got, expected);
}

export interface SessionRecord {
  id: string;
  areas: PortalArea[];
  scopes: Scope[];
  /** The channels and event types it is confined to; null: the whole application. */
  scope: { channels?: string[]; event_types?: string[] } | null;
  /** The key that minted it; null when the operator CLI did. */
  created_by_key_id: string | null;
  created_at: Date;
  /** When its sign-in link was used; null while the link is unused. */
  exchanged_at: Date | null;
  /** When it ends: the session's end once signed in, else the link's. */
  expires_at: Date;
}

/** An application's live sessions and unused sign-in links, newest first; never a token or cookie. */
export async function listSessions(sql: Sql, appId: string): Promise<SessionRecord[]> {
  return sql<SessionRecord[]>`
    SELECT id, areas, scopes, event_scope AS scope, created_by_key_id, created_at, exchanged_at, coalesce(expires_at, token_expires_at) AS expires_at
      FROM portal_sessions
     WHERE app_id = ${appId} AND revoked_at IS NULL AND coalesce(expires_at, token_expires_at) > now()
     ORDER BY created_at DESC, id
     LIMIT 500`;
}

/** Ends one session or unused sign-in link (sign-out, or an administrator's revocation); false when it was not live. */
export async function revokeSession(sql: Sql, appId: string, sessionId: string): Promise<boolean> {
  if (!isUuid(sessionId)) return false;
  const rows = await sql`
    WITH revoked AS (
      UPDATE portal_sessions SET revoked_at = now(), token_hash = NULL
      WHERE id = ${sessionId} AND app_id = ${appId} AND revoked_at IS NULL RETURNING id),
         stamp AS (${bumpStamp(sql, 'api-keys', 'revoked')})
    SELECT id FROM revoked`;
  return rows.length > 0;
}

/** Ends every session and unused sign-in link of an application; returns how many. */
export async function revokeAllSessions(sql: Sql, appId: string): Promise<number> {
  const rows = await sql`
    WITH revoked AS (
      UPDATE portal_sessions SET revoked_at = now(), token_hash = NULL
      WHERE app_id = ${appId} AND revoked_at IS NULL
        AND (expires_at > now() OR (exchanged_at IS NULL AND token_expires_at > now()))
      RETURNING id),
         stamp AS (${bumpStamp(sql, 'api-keys', 'revoked')})
    SELECT id FROM revoked`;
  return rows.length;
}

/** The areas as stored: deduplicated, and `all` alone when it is among them (it covers the rest). */
function normaliseAreas(areas: PortalArea[]): PortalArea[] {
  if (areas.includes('all')) return ['all'];
  return PORTAL_AREAS.filter((a) => areas.includes(a));
}

/** Reads the session cookie's secret from a Cookie header. */
export function sessionCookieSecret(cookieHeader: string | undefined): string | undefined {
  if (!cookieHeader) return undefined;
  for (const part of cookieHeader.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE) {
      const value = part.slice(eq + 1).trim();
      return /^[A-Za-z0-9_-]{20,100}$/.test(value) ? value : undefined;
    }
  }
  return undefined;
}

/**
 * Deletes sign-in links and sessions that ended (expired unused, expired, or revoked) more than
 * `days` ago (PORTAL_SESSION_RETENTION_DAYS), in bounded chunks. A row ended at the earlier of
 * its revocation and its session's end (`least` skips a NULL), else when its link expired.
 */
export async function prunePortalSessions(sql: Sql, days: number): Promise<number> {
  return deleteInBatches(
    async (limit) =>
      (
        await sql`
    DELETE FROM portal_sessions WHERE id IN (
      SELECT id FROM portal_sessions
      WHERE coalesce(least(revoked_at, expires_at), token_expires_at) < now() - ${days} * interval '1 day'
      LIMIT ${limit})`
      ).count,
  );
}

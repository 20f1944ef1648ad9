import { authenticate, type Credentials, type Principal } from '../auth/api-keys.js';
import type { ChangeStamps } from '../change-stamps.js';
import type { Sql } from '../db.js';
import { fail, ok, type Result } from '../errors.js';
import { areaAllows } from './areas.js';
import { csrfMatches, sessionBySecret, sessionCookieSecret } from './sessions.js';

export interface RequestCredentials extends Credentials {
  /** The `Cookie` header as received. */
  cookie?: string;
  /** The `X-CSRF-Token` header as received. */
  csrfToken?: string;
  method: string;
  /** The request path: what a session's areas are checked against. */
  path: string;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Authenticates a request by its API key or, when it sends no Authorization header, by a
 * developer-portal session cookie. A session acts as its application with the scopes it was
 * made with (never beyond its maker's), within its areas; a state-changing request by cookie must also carry the session's CSRF token, since
 * a browser attaches the cookie by itself. Requests with a key are checked exactly as before.
 */
export async function authenticateRequest(
  sql: Sql,
  stamps: ChangeStamps,
  creds: RequestCredentials,
  options: { appIdRequired: boolean },
): Promise<Result<Principal>> {
  const secret = creds.authorization ? undefined : sessionCookieSecret(creds.cookie);
  if (!secret) return authenticate(sql, stamps, creds, options);
  const session = await sessionBySecret(sql, stamps, secret);
  if (!session) return fail('UNAUTHORIZED', 'The portal session has expired or was ended; sign in again');
  const appHeader = creds.appId?.trim();
  if (appHeader && appHeader !== session.appId) return fail('UNAUTHORIZED', 'X-Service-App-ID does not match the portal session');
  if (!areaAllows(session.areas, creds.path))
    return fail('FORBIDDEN', `This portal session is limited to the ${session.areas.join(', ')} area`);
  if (!SAFE_METHODS.has(creds.method.toUpperCase()) && !csrfMatches(secret, creds.csrfToken))
    return fail('FORBIDDEN', 'A request signed in by portal session must carry its X-CSRF-Token header');
  return ok({
    appId: session.appId,
    keyId: session.sessionId,
    scopes: session.scopes,
    eventScope: session.eventScope,
    portalSessionId: session.sessionId,
    expiresAt: session.expiresAt,
  });
}

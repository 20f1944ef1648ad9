import type { Request, Response } from 'express';
import { z } from 'zod';
import { scopeSchema } from '../auth/scopes.js';
import { AppError, unwrap } from '../errors.js';
import { storedScope } from '../ledger/event-scope.js';
import { PORTAL_AREAS } from '../portal/areas.js';
import {
  createSignIn,
  csrfMatches,
  csrfToken,
  exchangeSignIn,
  listSessions,
  type PortalSession,
  revokeAllSessions,
  revokeSession,
  SESSION_COOKIE,
  sessionBySecret,
  sessionCookieSecret,
  signInInput,
  signInUrl,
} from '../portal/sessions.js';
import type { Api } from './api.js';
import type { RouteContext } from './routes.js';

const scopeOut = z.object({ channels: z.array(z.string()).optional(), event_types: z.array(z.string()).optional() });

const sessionOut = z.object({
  application_id: z.string(),
  application_name: z.string(),
  areas: z.array(z.enum(PORTAL_AREAS)),
  scopes: z.array(scopeSchema).describe('what the session may do: never more than the key that made it'),
  scope: scopeOut.nullable().describe('the channels and event types it is confined to; null: the whole application'),
  theme: z.object({ accent_color: z.string().optional(), logo_url: z.string().optional() }),
  return_url: z.string().nullable(),
  csrf_token: z.string().describe('send as X-CSRF-Token on every state-changing request'),
  expires_at: z.string(),
});

const sessionBody = (s: PortalSession, secret: string) => ({
  application_id: s.appId,
  application_name: s.appName,
  areas: s.areas,
  scopes: s.scopes,
  scope: storedScope(s.eventScope),
  theme: s.theme,
  return_url: s.returnUrl,
  csrf_token: csrfToken(secret),
  expires_at: s.expiresAt.toISOString(),
});

// The answers carry the CSRF token: no cache may keep them.
const NO_STORE = { 'Cache-Control': 'no-store' };

/**
 * The developer portal's access: API-key holders (and the operator CLI) mint one-time sign-in
 * links; the portal page exchanges one for an HttpOnly session cookie, which the public API
 * then accepts in place of a key (src/portal/auth.ts).
 */
export function registerPortalRoutes(api: Api, { deps, web }: RouteContext): void {
  const production = deps.config.NODE_ENV === 'production';
  const cookieOptions = { httpOnly: true, sameSite: 'strict', secure: production, path: '/' } as const;
  const current = async (req: Request) => {
    const secret = sessionCookieSecret(req.get('cookie'));
    const session = secret ? await sessionBySecret(deps.sql, web.stamps, secret) : undefined;
    return session && secret ? { session, secret } : undefined;
  };
  const signedOut = (res: Response) => {
    res.clearCookie(SESSION_COOKIE, cookieOptions);
    return new AppError('UNAUTHORIZED', 'No portal session, or it has expired or was ended; sign in again');
  };

  api.route({
    method: 'post',
    path: '/v1/portal/sessions',
    operationId: 'createPortalSession',
    description:
      'A one-time sign-in URL for the developer portal, limited to the chosen areas and to the scopes of the calling key. The URL works once and expires unused after a short time.',
    summary: "A one-time developer-portal sign-in URL for this application, limited to the chosen areas and to the caller's scopes",
    scope: 'admin',
    body: signInInput(production),
    responses: {
      201: {
        description: 'The sign-in URL (the token is in its fragment) and when it stops working',
        schema: z.object({ url: z.string(), scopes: z.array(scopeSchema).describe('what the session will hold'), expires_at: z.string() }),
      },
    },
    handler: async ({ deps, principal, body }) => {
      // A session minting sessions would outlive its own fixed expiry; only a key (or the operator) mints.
      if (principal.portalSessionId)
        throw new AppError('FORBIDDEN', 'Portal sign-in links are created with an API key, not from the portal');
      const link = unwrap(
        await createSignIn(deps.sql, principal, {
          appId: principal.appId,
          keyId: principal.keyId,
          areas: body.areas,
          scopes: body.scopes,
          eventScope: body.scope,
          returnUrl: body.return_url,
          theme: body.theme,
          expiresInSeconds: body.expires_in_seconds,
        }),
      );
      return {
        status: 201,
        headers: NO_STORE,
        body: { url: signInUrl(deps.config.PUBLIC_BASE_URL, link.token), scopes: link.scopes, expires_at: link.expiresAt.toISOString() },
      };
    },
  });

  api.route({
    method: 'get',
    path: '/v1/portal/sessions',
    operationId: 'listPortalSessions',
    description: "The application's live portal sessions and unused sign-in links: when each was made, its areas and when it expires.",
    summary: "This application's live portal sessions and unused sign-in links",
    scope: 'admin',
    responses: {
      200: {
        description: 'Newest first (at most 500)',
        schema: z.object({
          data: z.array(
            z.object({
              id: z.string(),
              areas: z.array(z.enum(PORTAL_AREAS)),
              scopes: z.array(scopeSchema),
              scope: scopeOut.nullable(),
              created_by_key_id: z.string().nullable(),
              created_at: z.string(),
              exchanged_at: z.string().nullable().describe('when the sign-in link was used; null while unused'),
              expires_at: z.string(),
            }),
          ),
        }),
      },
    },
    handler: async ({ deps, principal }) => ({ status: 200, body: { data: await listSessions(deps.sql, principal.appId) } }),
  });

  api.route({
    method: 'delete',
    path: '/v1/portal/sessions/:id',
    operationId: 'revokePortalSession',
    description: 'Ends one portal session, or cancels one unused sign-in link, at once.',
    summary: 'End one portal session (or unused sign-in link) at once',
    scope: 'admin',
    params: z.object({ id: z.string().max(100) }),
    responses: { 204: { description: 'Ended' } },
    errors: ['NOT_FOUND'],
    handler: async ({ deps, principal, params }) => {
      if (!(await revokeSession(deps.sql, principal.appId, params.id)))
        throw new AppError('NOT_FOUND', 'No live portal session with this id');
      return { status: 204 };
    },
  });

  api.route({
    method: 'delete',
    path: '/v1/portal/sessions',
    operationId: 'revokePortalSessions',
    description: 'Ends every portal session and unused sign-in link of the application at once.',
    summary: 'End every portal session and unused sign-in link of this application',
    scope: 'admin',
    responses: { 200: { description: 'How many were ended', schema: z.object({ revoked: z.number() }) } },
    handler: async ({ deps, principal }) => ({ status: 200, body: { revoked: await revokeAllSessions(deps.sql, principal.appId) } }),
  });

  api.route({
    method: 'post',
    path: '/portal/session',
    operationId: 'exchangePortalToken',
    description: "Called by the portal page: trades a sign-in link's token for the session cookie and a CSRF token. A token works once.",
    summary: "Exchange a sign-in link's token for the portal session cookie (once)",
    body: z.strictObject({ token: z.string().min(1).max(200) }),
    responses: { 200: { description: 'Signed in; the cookie is set', schema: sessionOut } },
    errors: ['UNAUTHORIZED'],
    handler: async ({ res, deps, body }) => {
      const { session, secret } = unwrap(await exchangeSignIn(deps.sql, body.token));
      res.cookie(SESSION_COOKIE, secret, { ...cookieOptions, expires: session.expiresAt });
      return { status: 200, headers: NO_STORE, body: sessionBody(session, secret) };
    },
  });

  api.route({
    method: 'get',
    path: '/portal/session',
    operationId: 'getPortalSession',
    description: 'Called by the portal page: the session its cookie belongs to (application, areas, scopes, expiry).',
    summary: 'The current portal session (from its cookie)',
    portalCookie: true,
    responses: { 200: { description: 'Signed in', schema: sessionOut } },
    errors: ['UNAUTHORIZED'],
    handler: async ({ req, res }) => {
      const found = await current(req);
      if (!found) throw signedOut(res);
      return { status: 200, headers: NO_STORE, body: sessionBody(found.session, found.secret) };
    },
  });

  api.route({
    method: 'delete',
    path: '/portal/session',
    operationId: 'endPortalSession',
    description: 'Called by the portal page: signs out, ending the session of its cookie.',
    summary: 'Sign out of the portal (needs X-CSRF-Token)',
    portalCookie: true,
    responses: { 204: { description: 'Signed out; the cookie is cleared' } },
    errors: ['UNAUTHORIZED', 'FORBIDDEN'],
    handler: async ({ req, res, deps }) => {
      const found = await current(req);
      if (!found) throw signedOut(res);
      if (!csrfMatches(found.secret, req.get('x-csrf-token'))) throw new AppError('FORBIDDEN', 'Signing out needs the X-CSRF-Token header');
      await revokeSession(deps.sql, found.session.appId, found.session.sessionId);
      res.clearCookie(SESSION_COOKIE, cookieOptions);
      return { status: 204 };
    },
  });
}

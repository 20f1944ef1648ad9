import { createContext, useContext } from 'react';
import type { Area, Session } from './types.ts';

export const SessionContext = createContext<Session | undefined>(undefined);

/** The signed-in session; pages under the shell are only rendered with one. */
export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error('useSession outside a signed-in page');
  return s;
}

/** The portal's areas and which session areas open them (mirrors the API's own area check). */
export const AREAS = [
  { path: '/live', label: 'Live events', needs: 'events' },
  { path: '/explore', label: 'Explore', needs: 'events' },
  { path: '/webhooks', label: 'Webhooks', needs: 'webhooks' },
  { path: '/connections', label: 'Connections', needs: 'all' },
  { path: '/users', label: 'Users', needs: 'all' },
  { path: '/keys', label: 'Keys', needs: 'all' },
] as const satisfies readonly { path: string; label: string; needs: Area }[];

export const canOpen = (areas: Area[], needs: Area) => areas.includes('all') || areas.includes(needs);

/** The sign-in link's token: `#token=…` (or `?token=…`), read once and then removed from the address bar. */
export function takeSignInToken(): string | undefined {
  const fromHash = new URLSearchParams(window.location.hash.slice(1)).get('token');
  const fromQuery = new URLSearchParams(window.location.search).get('token');
  const token = fromHash ?? fromQuery ?? undefined;
  if (token) window.history.replaceState(null, '', window.location.pathname);
  return token || undefined;
}

import { expect } from 'vitest';
import type { TestStack } from './stack.js';

/** A browser signed in to the portal: its cookie, CSRF token and the session answer. */
export interface SignedIn {
  cookie: string;
  setCookie: string;
  csrf: string;
  body: Record<string, any>;
}

/** The one-time token a sign-in URL carries in its fragment. */
export const tokenOf = (url: string) => new URL(url).hash.replace(/^#token=/, '');

/** Exchanges a sign-in URL's token as the portal page does; the exchange must succeed. */
export async function exchangeLink(s: TestStack, url: string): Promise<SignedIn> {
  const r = await s.request('POST', '/portal/session', { body: { token: tokenOf(url) } });
  expect(r.status, r.text).toBe(200);
  const setCookie = r.headers.get('set-cookie') ?? '';
  return { cookie: setCookie.split(';')[0], setCookie, csrf: r.json.csrf_token, body: r.json };
}

/** A request signed in by cookie only: no Authorization, no X-Service-App-ID. */
export const asSession = (s: TestStack, si: SignedIn, method: string, path: string, body?: unknown, csrf = true) =>
  s.request(method, path, { body, headers: { Cookie: si.cookie, ...(csrf ? { 'X-CSRF-Token': si.csrf } : {}) } });
